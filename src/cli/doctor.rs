//! `envcraft doctor`: what this machine can enforce.

use std::io::Write;

use clap::Args;

use crate::cli::error::{Error, exit};
use crate::sandbox::probe::Doctor;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Which root filesystems a run can have here: the host's, and the images in the store of
/// the default state root.
fn roots() -> String {
    let state = crate::workspace::state_root::default_root();
    let images = crate::image::Store::existing(&state)
        .and_then(|s| s.list().ok())
        .unwrap_or_default();
    let names: Vec<&str> = images.iter().map(|r| r.name.as_str()).collect();
    format!(
        "root filesystems            host (read-only system paths); {} image(s) in {}{}",
        names.len(),
        state.join("images").display(),
        if names.is_empty() {
            String::new()
        } else {
            format!(": {}", names.join(", "))
        }
    )
}

pub fn run(args: DoctorArgs) -> Result<i32, Error> {
    let report = Doctor::run();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
    } else {
        let lines = [
            format!("kernel                      {}", report.kernel),
            format!("running as                  {}", report.invoker),
            format!(
                "landlock                    ABI {} (network rules: {}, scoping: {})",
                report.landlock_abi,
                yes(report.landlock_network),
                yes(report.landlock_scope)
            ),
            format!(
                "user namespaces             {}",
                yes(report.user_namespaces)
            ),
            format!(
                "overlayfs in a user ns      {}",
                yes(report.overlay_in_user_namespace)
            ),
            format!("seccomp filters             {}", yes(report.seccomp)),
            format!(
                "cgroup limits               {}",
                serde_json::to_string(&report.cgroup_limits)
                    .unwrap_or_default()
                    .trim_matches('"')
            ),
            format!(
                "cgroup v2 controllers       {}",
                report.cgroup_v2_controllers.join(" ")
            ),
            format!(
                "cgroup v1 controllers       {}",
                report.cgroup_v1_controllers.join(" ")
            ),
            roots(),
            String::new(),
            "policy      can run   missing (required)               not applied here (best effort)"
                .into(),
        ];
        for line in lines {
            writeln!(out, "{line}").map_err(Error::Output)?;
        }
        for p in &report.policies {
            let list = |v: &[crate::spec::policy::Protection]| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    v.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                }
            };
            writeln!(
                out,
                "{:<11} {:<9} {:<32} {}",
                p.name,
                yes(p.can_run),
                list(&p.missing),
                list(&p.degraded)
            )
            .map_err(Error::Output)?;
        }
    }
    let default_ok = report
        .policies
        .iter()
        .any(|p| p.name == "default" && p.can_run);
    Ok(if default_ok { 0 } else { exit::DOCTOR_UNFIT })
}
