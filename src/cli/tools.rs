//! `envcraft tools TASK [--format openai|json]`: the tool schemas an LLM is given for a task.

use std::io::Write;

use clap::Args;
use serde_json::{Value, json};

use super::task_args::{StateDir, TaskArgs};
use crate::cli::error::Error;
use crate::session::offered_schemas;
use crate::spec::skill::SkillSpec;
use crate::tools::skill::OfferedSkill;

#[derive(Debug, Args)]
pub struct ToolsArgs {
    #[command(flatten)]
    pub task: TaskArgs,
    /// `openai` (function-calling tools) or `json` (name, description, parameters).
    #[arg(long, default_value = "openai", value_parser = ["openai", "json"])]
    pub format: String,
    /// Where a Harbor task's image is pulled or built into (its image store).
    #[command(flatten)]
    pub state_dir: StateDir,
}

pub fn run(args: ToolsArgs) -> Result<i32, Error> {
    let state_root = crate::workspace::state_root::open(args.state_dir.path.clone())?;
    let task = args.task.open(&state_root)?;
    let mut skills = Vec::new();
    for name in &task.env.skills {
        let spec = SkillSpec::find(name, &args.task.skills.path)?;
        skills.push(OfferedSkill {
            name: spec.name.clone(),
            description: spec.description.clone(),
            schema: spec.schema.clone(),
            executable: spec.executable.clone(),
            timeout: std::time::Duration::from_secs(spec.timeout_secs),
        });
    }
    let schemas = offered_schemas(&task.env.tools, &skills);
    let out: Vec<Value> = schemas
        .into_iter()
        .map(|(name, description, parameters)| match args.format.as_str() {
            "openai" => json!({
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            }),
            _ => json!({"name": name, "description": description, "parameters": parameters}),
        })
        .collect();
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &out).map_err(|e| Error::Output(e.into()))?;
    writeln!(stdout).map_err(Error::Output)?;
    Ok(0)
}
