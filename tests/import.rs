//! Importers as a user drives them: `envcraft import clawgym|pinchbench` over the fixtures in
//! `../shared/fixtures/` (real tasks written by others), then the imported graders run by
//! `envcraft verify` / `envcraft run` in the sandbox (through `contained`), compared with the
//! same graders run directly with python3, outside any sandbox, the way their own harnesses
//! run them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod import_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use envcraft::spec::TaskSpec;
use import_support::{
    clawgym_direct, contained, copy_dir, envcraft, fixtures, import, imported, last_line_score,
    root, run_in_sandbox,
};

/// Every file and directory under `dir`: (relative path, mode bits, content).
fn tree(dir: &Path) -> Vec<(PathBuf, u32, Option<Vec<u8>>)> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.path().symlink_metadata().unwrap();
            let content = meta.is_file().then(|| fs::read(e.path()).unwrap());
            (
                e.path().strip_prefix(dir).unwrap().to_path_buf(),
                meta.permissions().mode(),
                content,
            )
        })
        .collect()
}

/// The regular files of [`tree`] (a directory's own mode is not imported: the fixtures' are
/// read-only, and an imported tree must stay removable).
fn files_of(dir: &Path) -> Vec<(PathBuf, u32, Option<Vec<u8>>)> {
    tree(dir).into_iter().filter(|e| e.2.is_some()).collect()
}

/// PinchBench's own way, outside any sandbox: the first ```python block of `## Automated
/// Checks` exec'd, `grade(transcript, ws)` called, the mean of the numeric values.
const PINCHBENCH_DIRECT: &str = r###"
import json, re, sys
md = open(sys.argv[1], encoding="utf-8").read()
section = md.split("## Automated Checks", 1)[1]
code = re.search(r"```python\s*(.*?)\s*```", section, re.DOTALL).group(1)
transcript = []
if len(sys.argv) > 3:
    transcript = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8") if l.strip()]
namespace = {}
exec(code, namespace)
scores = namespace["grade"](transcript, sys.argv[2])
values = [float(v) for v in scores.values() if isinstance(v, (int, float))]
print(repr(sum(values) / len(values) if values else 0.0))
"###;

fn pinchbench_direct(md: &Path, ws: &Path, transcript: Option<&Path>) -> f64 {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(PINCHBENCH_DIRECT).arg(md).arg(ws);
    if let Some(t) = transcript {
        cmd.arg(t);
    }
    let out = cmd.current_dir(ws).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_line_score(&String::from_utf8_lossy(&out.stdout))
}

/// `envcraft verify TASK --workspace WS --json` in the sandbox: the reward.
fn verify_in_sandbox(task: &Path, ws: &Path) -> f64 {
    let (code, out, err) = contained(&[
        "verify",
        task.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        code == 0 || code == 1,
        "verify failed ({code}): {err}\n{out}"
    );
    let verdict: Value = serde_json::from_str(out.trim()).unwrap();
    // The grader ran and printed a score: a reason would mean it crashed or printed garbage.
    let actual = verdict["checks"][0]["actual"].as_str().unwrap();
    assert!(!actual.contains('('), "{}: {actual}", task.display());
    verdict["reward"].as_f64().unwrap()
}

#[test]
fn every_fixture_task_imports_with_its_prompt_byte_for_byte_and_its_source() {
    let Some(fx) = fixtures() else { return };
    let cg = import("clawgym", &fx.join("clawgym"));
    let cg_tasks = imported(cg.path());
    assert_eq!(cg_tasks.len(), 10);
    for (env, task_dir) in &cg_tasks {
        let task = TaskSpec::load(task_dir).unwrap();
        let fixture = fx.join("clawgym").join(&task.id);
        let entry: Value =
            serde_json::from_str(&fs::read_to_string(fixture.join("data_entry.json")).unwrap())
                .unwrap();
        assert_eq!(task.turns, [entry["user_query"].as_str().unwrap()]);
        let source = task.source.as_ref().unwrap();
        assert_eq!(
            (
                source.origin.as_str(),
                source.id.as_str(),
                source.license.as_str()
            ),
            ("ClawGym", task.id.as_str(), "Apache-2.0")
        );
        assert_eq!(task.verifier.grader_dir, "reward");
        assert_eq!(task.verifier.timeout_secs, 120);
        assert_eq!(task.env.policy, "default");
        assert!(task.solution.is_none());
        // input_files/ verbatim, reward/ as the grader, the metadata kept.
        assert_eq!(
            files_of(&env.join("files")),
            files_of(&fixture.join("input_files"))
        );
        assert_eq!(
            files_of(&task_dir.join("grader")),
            files_of(&fixture.join("reward"))
        );
        let meta: Value =
            serde_json::from_str(&fs::read_to_string(task_dir.join("source.json")).unwrap())
                .unwrap();
        assert_eq!(meta["metadata"], entry["metadata"]);
    }
    // Tasks that need the web are imported unchanged, with a note the agent and people see.
    let web = &cg_tasks
        .iter()
        .find(|(e, _)| e.ends_with("clawgym-task_0006"))
        .unwrap()
        .0;
    let docs = fs::read_to_string(web.join("docs.md")).unwrap();
    assert!(docs.contains("needs the network"), "{docs}");
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(web.join("tasks/task_0006/source.json")).unwrap())
            .unwrap();
    assert_eq!(meta["unmet_needs"][0]["need"], "network");
    // ... and skipped, with the reason, when asked.
    let dest = tempfile::tempdir().unwrap();
    let (code, out, _) = envcraft(&[
        "import",
        "clawgym",
        fx.join("clawgym").to_str().unwrap(),
        dest.path().to_str().unwrap(),
        "--skip-unmet-needs",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("skipped task_0006: needs"), "{out}");
    assert!(out.contains("6 clawgym task(s) imported"), "{out}");

    let pb = import("pinchbench", &fx.join("pinchbench"));
    let pb_tasks = imported(pb.path());
    assert_eq!(pb_tasks.len(), 4);
    for (env, task_dir) in &pb_tasks {
        let task = TaskSpec::load(task_dir).unwrap();
        let md = fs::read_to_string(fx.join(format!("pinchbench/{}.md", task.id))).unwrap();
        let prompt = md
            .split("## Prompt\n\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\n## ").next())
            .unwrap();
        assert_eq!(task.turns, [prompt.trim_end()]);
        assert_eq!(task.source.as_ref().unwrap().license, "MIT");
        assert!(env.join("files").is_dir());
        let grade = fs::read_to_string(task_dir.join("grader/grade.py")).unwrap();
        assert!(md.contains(grade.trim()), "{}", task.id);
    }
    // Inline workspace files are written as YAML would read them.
    let notes = fs::read_to_string(
        pb.path()
            .join("out/pinchbench-task_08_memory/files/notes.md"),
    )
    .unwrap();
    assert!(notes.starts_with("# Project Phoenix - Development Notes\n\n## Timeline\n"));
    assert!(notes.ends_with("- Waiting on security audit completion\n"));

    // One task, given as a folder or a file, imports into a temp dir ready to load.
    for one in [
        fx.join("clawgym/task_0003"),
        fx.join("pinchbench/task_12_skill_search.md"),
    ] {
        let (_temp, imported) =
            envcraft::import::import_one_to_temp(&one, &Default::default()).unwrap();
        let task_dir = imported.task_dir;
        let task = TaskSpec::load(&task_dir).unwrap();
        assert!(one.to_str().unwrap().contains(&task.id));
    }
}

#[test]
fn reimporting_the_same_source_gives_byte_identical_trees() {
    let Some(fx) = fixtures() else { return };
    for format in ["clawgym", "pinchbench"] {
        let a = import(format, &fx.join(format));
        let b = import(format, &fx.join(format));
        let (ta, tb) = (tree(&a.path().join("out")), tree(&b.path().join("out")));
        assert!(ta.len() > 20, "{format}: {}", ta.len());
        assert_eq!(ta, tb, "{format}");
    }
}

#[test]
fn every_imported_grader_scores_the_untouched_workspace_as_it_does_outside_the_sandbox() {
    let Some(fx) = fixtures() else { return };
    if !common::sandbox_ready() {
        return;
    }
    let cg = import("clawgym", &fx.join("clawgym"));
    for (env, task_dir) in imported(cg.path()) {
        let id = task_dir.file_name().unwrap().to_str().unwrap().to_string();
        let fixture = fx.join("clawgym").join(&id);
        let in_sandbox = verify_in_sandbox(&task_dir, &env.join("files"));
        let ws = tempfile::tempdir().unwrap();
        copy_dir(&fixture.join("input_files"), ws.path());
        let direct = clawgym_direct(&fixture, ws.path());
        assert_eq!(in_sandbox, direct, "ClawGym {id}");
    }
    let pb = import("pinchbench", &fx.join("pinchbench"));
    for (env, task_dir) in imported(pb.path()) {
        let id = task_dir.file_name().unwrap().to_str().unwrap().to_string();
        let in_sandbox = verify_in_sandbox(&task_dir, &env.join("files"));
        let ws = tempfile::tempdir().unwrap();
        copy_dir(&env.join("files"), ws.path());
        let direct = pinchbench_direct(&fx.join(format!("pinchbench/{id}.md")), ws.path(), None);
        assert_eq!(in_sandbox, direct, "PinchBench {id}");
    }
}

/// A complete solution of ClawGym task_0000, run by the agent with `exec`.
const SOLVE_0000: &str = r#"import csv, json, os
from datetime import date, timedelta
inc = list(csv.DictReader(open("input/incidents.csv", newline="", encoding="utf-8")))
con = list(csv.DictReader(open("input/contacts.csv", newline="", encoding="utf-8")))
rows = []
for i in inc:
    if i["status"] != "open" or int(i["severity"]) < 3:
        continue
    role = {"content": "Sponsor", "moderation": "Moderator"}.get(i["category"])
    d = date.fromisoformat(i["date"].strip())
    for c in con:
        if c["role"] == role and c["allowed_followup"] == "yes":
            sev, rel = int(i["severity"]), int(c["relevance"])
            rows.append({"reminder_id": "R-%s-%s" % (i["incident_id"], c["contact_id"]),
                "incident_id": i["incident_id"], "contact_id": c["contact_id"],
                "contact_name": c["name"], "role": c["role"], "incident_date": d.isoformat(),
                "severity": sev, "relevance": rel, "due_by": (d + timedelta(days=3)).isoformat(),
                "reason": "Open incident on topic: " + i["topic"], "priority_score": sev * 10 + rel})
rows.sort(key=lambda r: (-r["priority_score"], r["due_by"], r["reminder_id"]))
os.makedirs("output", exist_ok=True)
with open("output/reminders.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
by_role = {}
for r in rows:
    by_role[r["role"]] = by_role.get(r["role"], 0) + 1
top = [{"reminder_id": r["reminder_id"], "priority_score": r["priority_score"]} for r in rows[:5]]
json.dump({"total_reminders": len(rows), "by_role": by_role, "top_5": top}, open("output/summary.json", "w"))
"#;

/// (task id, files the agent writes, calls it makes first).
type PinchBenchCase = (&'static str, Vec<(&'static str, &'static str)>, Vec<Value>);

#[test]
fn hand_written_trajectories_reach_the_score_their_own_harness_gives() {
    let Some(fx) = fixtures() else { return };
    if !common::sandbox_ready() {
        return;
    }
    // ClawGym: (task, the agent's calls, the same change made by hand in a plain directory).
    type ByHand = fn(&Path);
    let cg_cases: [(&str, Vec<Value>, ByHand); 2] = [
        (
            "task_0000",
            vec![
                json!({"tool": "write", "args": {"path": "solve.py", "content": SOLVE_0000}}),
                json!({"tool": "exec", "args": {"command": "python3 solve.py"}}),
            ],
            |ws| {
                fs::write(ws.join("solve.py"), SOLVE_0000).unwrap();
                let status = Command::new("python3")
                    .arg("solve.py")
                    .current_dir(ws)
                    .status()
                    .unwrap();
                assert!(status.success());
            },
        ),
        (
            "task_0003",
            vec![
                json!({"tool": "write", "args": {"path": "output/i18n/es.json", "content": "{\"welcome\": \"Bienvenidos\"}\n"}}),
                json!({"tool": "write", "args": {"path": "output/meeting_notes.md", "content": "# Meeting notes\n\nSpanish is enabled.\n"}}),
            ],
            |ws| {
                fs::create_dir_all(ws.join("output/i18n")).unwrap();
                fs::write(
                    ws.join("output/i18n/es.json"),
                    "{\"welcome\": \"Bienvenidos\"}\n",
                )
                .unwrap();
                fs::write(
                    ws.join("output/meeting_notes.md"),
                    "# Meeting notes\n\nSpanish is enabled.\n",
                )
                .unwrap();
            },
        ),
    ];
    let cg = import("clawgym", &fx.join("clawgym"));
    for (id, calls, by_hand) in cg_cases {
        let task = cg.path().join(format!("out/clawgym-{id}/tasks/{id}"));
        let (report, _keep) = run_in_sandbox(&task, &calls);
        let ws = tempfile::tempdir().unwrap();
        copy_dir(&fx.join(format!("clawgym/{id}/input_files")), ws.path());
        by_hand(ws.path());
        let direct = clawgym_direct(&fx.join(format!("clawgym/{id}")), ws.path());
        assert_eq!(
            report["reward"].as_f64().unwrap(),
            direct,
            "ClawGym {id}: {report}"
        );
        eprintln!("ClawGym {id}: {direct} in the sandbox and directly");
        if id == "task_0000" {
            assert_eq!(direct, 1.0, "the complete solution scores 1");
        }
    }

    // PinchBench: the transcript matters to some graders, so the direct run gets the one the
    // session wrote (what OpenClaw would have recorded).
    let settings = "{\n  \"database\": {\"host\": \"prod-db.example.com\", \"port\": 5432, \"name\": \"myapp_prod\"},\n  \"api\": {\"endpoint\": \"https://api.example.com\", \"timeout\": 30},\n  \"logging\": {\"level\": \"warn\"}\n}\n";
    let database = "development:\n  host: prod-db.example.com\n  database: myapp_prod\n";
    let pb_cases: [PinchBenchCase; 4] = [
        (
            "task_09_files",
            vec![
                ("src/main.py", "print(\"Hello, world!\")\n"),
                ("README.md", "# My Project\n"),
                (".gitignore", "__pycache__/\n"),
            ],
            vec![],
        ),
        (
            "task_12_skill_search",
            vec![
                ("config/settings.json", settings),
                ("config/database.yml", database),
            ],
            vec![],
        ),
        (
            "task_08_memory",
            vec![("answer.txt", "The beta release deadline is June 1, 2024.\n")],
            vec![json!({"tool": "read", "args": {"path": "notes.md"}})],
        ),
        (
            "task_00_sanity",
            vec![],
            vec![json!({"tool": "ls", "args": {}})],
        ),
    ];
    let pb = import("pinchbench", &fx.join("pinchbench"));
    for (id, writes, extra_calls) in pb_cases {
        let env = pb.path().join(format!("out/pinchbench-{id}"));
        let mut calls = extra_calls;
        calls.extend(
            writes
                .iter()
                .map(|(p, c)| json!({"tool": "write", "args": {"path": p, "content": c}})),
        );
        let (report, keep) = run_in_sandbox(&env.join("tasks").join(id), &calls);
        let ws = tempfile::tempdir().unwrap();
        copy_dir(&env.join("files"), ws.path());
        for (path, content) in &writes {
            let target = ws.path().join(path);
            fs::create_dir_all(target.parent().unwrap()).unwrap();
            fs::write(target, content).unwrap();
        }
        let transcript = keep.path().join("keep/transcript.jsonl");
        assert!(transcript.is_file());
        let direct = pinchbench_direct(
            &fx.join(format!("pinchbench/{id}.md")),
            ws.path(),
            Some(&transcript),
        );
        assert_eq!(
            report["reward"].as_f64().unwrap(),
            direct,
            "PinchBench {id}: {report}"
        );
        assert!(
            direct > 0.5,
            "{id}: the hand-written answer earns credit: {direct}"
        );
    }
}

/// A grader that tries the network and the host's files (each sub-score is 1 when the attempt
/// was stopped) and writes in its own view of the workspace (1 when that works: the view is the
/// grader's, writable, and thrown away; the test checks that nothing of it reaches the host).
const HOSTILE_GRADE: &str = r#"def grade(transcript, workspace_path):
    import os, socket
    scores = {}
    for name, addr in [("internet", ("1.1.1.1", 80)), ("loopback_ssh", ("127.0.0.1", 22))]:
        try:
            socket.create_connection(addr, timeout=2).close()
            scores["no_" + name] = 0.0
        except OSError:
            scores["no_" + name] = 1.0
    for name, path, allowed in [("no_write_etc", "/etc/envcraft-import-MARK", False),
                                 ("no_write_host_dir", "HOSTDIR/escaped-MARK", False),
                                 ("own_view_workspace", os.path.join(workspace_path, "litter-MARK"), True),
                                 ("own_view_alias", "/root/.openclaw/workspace/litter-MARK-2", True)]:
        try:
            with open(path, "w") as f:
                f.write("x")
            wrote = True
        except OSError:
            wrote = False
        scores[name] = 1.0 if wrote == allowed else 0.0
    return scores"#;

#[test]
fn a_grader_that_reaches_for_the_network_or_writes_outside_is_contained_and_scored() {
    if !common::sandbox_ready() {
        return;
    }
    let mark = common::unique_token();
    let host_dir = tempfile::tempdir().unwrap();
    let grade = HOSTILE_GRADE
        .replace("MARK", &mark)
        .replace("HOSTDIR", host_dir.path().to_str().unwrap());
    let src = tempfile::tempdir().unwrap();
    // The same grader in both formats.
    let md = src.path().join("task_99_hostile.md");
    fs::write(
        &md,
        format!(
            "---\nid: task_99_hostile\ngrading_type: automated\ntimeout_seconds: 60\nworkspace_files:\n  - path: \"data.txt\"\n    content: |\n      hello\n---\n\n## Prompt\n\nDo nothing.\n\n## Automated Checks\n\n```python\n{grade}\n```\n"
        ),
    )
    .unwrap();
    let cg_task = src.path().join("clawgym/task_9999");
    fs::create_dir_all(cg_task.join("input_files")).unwrap();
    fs::create_dir_all(cg_task.join("reward")).unwrap();
    fs::write(cg_task.join("input_files/data.txt"), "hello\n").unwrap();
    fs::write(
        cg_task.join("data_entry.json"),
        r#"{"task_id": "task_9999", "user_query": "Do nothing.", "input_mount_dir": "/root/.openclaw/workspace", "metadata": {}}"#,
    )
    .unwrap();
    fs::write(
        cg_task.join("reward/check.py"),
        format!("import json, sys\n{grade}\nprint(json.dumps(grade([], sys.argv[1])))\n"),
    )
    .unwrap();
    fs::copy(
        root().join("../shared/fixtures/clawgym/task_0000/reward/reward.sh"),
        cg_task.join("reward/reward.sh"),
    )
    .or_else(|_| {
        fs::write(
            cg_task.join("reward/reward.sh"),
            "python3 /root/.openclaw/workspace/reward/check.py /root/.openclaw/workspace | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(d.values())/len(d))'\n",
        )
        .map(|_| 0)
    })
    .unwrap();

    for (format, from, task) in [
        (
            "pinchbench",
            md.clone(),
            "out/pinchbench-task_99_hostile/tasks/task_99_hostile",
        ),
        (
            "clawgym",
            cg_task.clone(),
            "out/clawgym-task_9999/tasks/task_9999",
        ),
    ] {
        let dest = import(format, &from);
        let task = dest.path().join(task);
        let env = task.parent().unwrap().parent().unwrap();
        let before = tree(&env.join("files"));
        let (code, out, err) = contained(&[
            "verify",
            task.to_str().unwrap(),
            "--workspace",
            env.join("files").to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(
            code, 0,
            "{format}: every attempt is stopped and scored: {err}\n{out}"
        );
        let verdict: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(verdict["reward"], 1.0, "{format}: {verdict}");
        // Nothing it tried to write exists anywhere on the host.
        assert_eq!(tree(&env.join("files")), before, "{format}");
        assert!(!Path::new(&format!("/etc/envcraft-import-{mark}")).exists());
        assert_eq!(
            fs::read_dir(host_dir.path()).unwrap().count(),
            0,
            "{format}"
        );
    }
}

#[test]
fn what_cannot_be_represented_is_refused_with_a_reason_and_the_rest_imported() {
    let src = tempfile::tempdir().unwrap();
    fs::write(
        src.path().join("task_01_anchor.md"),
        "---\nid: task_01_anchor\nname: &n Anchored\n---\n\n## Prompt\n\nHi.\n",
    )
    .unwrap();
    fs::write(
        src.path().join("task_02_escape.md"),
        "---\nid: task_02_escape\nworkspace_files:\n  - path: \"../../outside.txt\"\n    content: x\n---\n\n## Prompt\n\nHi.\n\n## Automated Checks\n\n```python\ndef grade(t, w):\n    return {}\n```\n",
    )
    .unwrap();
    fs::write(
        src.path().join("task_03_judged.md"),
        "---\nid: task_03_judged\ngrading_type: llm_judge\n---\n\n## Prompt\n\nWrite a poem.\n\n## LLM Judge Rubric\n\n### Criterion 1: Rhyme (Weight: 100%)\n",
    )
    .unwrap();
    let dest = tempfile::tempdir().unwrap();
    let (code, out, err) = envcraft(&[
        "import",
        "pinchbench",
        src.path().to_str().unwrap(),
        dest.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("skipped task_01_anchor:"), "{out}");
    assert!(out.contains("line 3"), "{out}");
    assert!(out.contains("skipped task_02_escape:"), "{out}");
    assert!(out.contains("not a path inside the workspace"), "{out}");
    // The judged task is imported with envcraft's judge: its rubric, kind `judge`.
    let task = dest
        .path()
        .join("pinchbench-task_03_judged/tasks/task_03_judged");
    let rubric = fs::read_to_string(task.join("rubric.md")).unwrap();
    assert!(rubric.contains("Criterion 1: Rhyme"));
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(task.join("source.json")).unwrap()).unwrap();
    assert_eq!(meta["needs_llm_judge"], true);
    assert_eq!(meta["judge_weight"], 1.0);
    let spec = TaskSpec::load(&task).unwrap();
    assert_eq!(spec.verifier.judge.unwrap().rubric, "rubric.md");
    assert!(!dest.path().join("outside.txt").exists());
    if common::sandbox_ready() {
        let ws = dest.path().join("pinchbench-task_03_judged/files");
        let (code, out, err) = contained(&[
            "verify",
            task.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ]);
        // No judge endpoint: the judge did not run, so there is no reward, and the check says why.
        assert_eq!(code, 1, "{err}");
        let verdict: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(verdict["reward"], Value::Null, "{out}");
        assert_eq!(verdict["not_run"], json!(["judge"]), "{out}");
        assert!(
            verdict["checks"][0]["actual"]
                .as_str()
                .unwrap()
                .contains("no judge endpoint"),
            "{out}"
        );
    }
    // Importing again over it is refused, not merged.
    let (code, out, _) = envcraft(&[
        "import",
        "pinchbench",
        src.path().join("task_03_judged.md").to_str().unwrap(),
        dest.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("already exists"), "{out}");
}

#[test]
fn run_and_suite_take_a_foreign_task_or_set_as_it_is() {
    let Some(fx) = fixtures() else { return };
    if !common::sandbox_ready() {
        return;
    }
    // `run` on the ClawGym folder itself: the full solution scores 1, as after an import.
    let calls = [
        json!({"tool": "write", "args": {"path": "solve.py", "content": SOLVE_0000}}),
        json!({"tool": "exec", "args": {"command": "python3 solve.py"}}),
    ];
    let (report, _keep) = run_in_sandbox(&fx.join("clawgym/task_0000"), &calls);
    assert_eq!(report["reward"].as_f64(), Some(1.0), "{report}");
    assert_eq!(report["task"], "clawgym-task_0000/task_0000");
    for key in ["create_us", "verify_us", "cleanup_us"] {
        assert!(report[key].as_u64().is_some(), "{key} missing: {report}");
    }
    // `run` on one PinchBench file: a wrong answer scores below 1, not an error.
    let (report, _keep) = run_in_sandbox(&fx.join("pinchbench/task_09_files.md"), &[]);
    assert!(report["reward"].as_f64().unwrap() < 1.0, "{report}");

    // `suite` over both sets as they are: every task run and scored, none passed by noop,
    // and the source folders untouched.
    let before: Vec<_> = ["clawgym", "pinchbench"]
        .iter()
        .map(|s| tree(&fx.join(s)))
        .collect();
    let (code, out, err) = contained(&[
        "suite",
        fx.join("clawgym").to_str().unwrap(),
        fx.join("pinchbench").to_str().unwrap(),
        "--agent",
        "noop",
        "--json",
    ]);
    assert_eq!(code, 0, "suite failed: {err}\n{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let tasks = report["tasks"].as_array().unwrap();
    let clawgym = fs::read_dir(fx.join("clawgym"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("data_entry.json").is_file())
        .count();
    assert_eq!(tasks.len(), clawgym + 4, "{report}");
    for t in tasks {
        assert!(t["reward"].as_f64().is_some(), "no reward: {t}");
        assert_eq!(t["passed"], false, "{t}");
    }
    let after: Vec<_> = ["clawgym", "pinchbench"]
        .iter()
        .map(|s| tree(&fx.join(s)))
        .collect();
    assert!(before == after, "the source sets changed");

    // A path that is no task set of any kind is refused, naming what was expected.
    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = envcraft(&["suite", empty.path().to_str().unwrap()]);
    assert_eq!(code, 125, "{err}");
    assert!(
        err.contains("no task under") && err.contains("ClawGym"),
        "{err}"
    );
}
