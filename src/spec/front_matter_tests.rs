#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn yaml(text: &str) -> Result<Yaml, SyntaxError> {
    let lines: Vec<&str> = text.lines().collect();
    parse_yaml(&lines, 2)
}

fn s(y: Option<&Yaml>) -> &str {
    y.and_then(Yaml::as_str).unwrap()
}

#[test]
fn the_front_matter_subset_reads_like_yaml() {
    let y = yaml(
        "id: task_08_memory\nname: \"Quoted: yes\"\ngrading_type: automated # a comment\n\
         timeout_seconds: 120\nempty: []\nworkspace_files:\n  - path: \"notes.md\"\n    content: |\n      # Title\n\n      - item\n        indented\n  - source: assets/a.txt\n    dest: 'it''s.txt'\n\
         grading_weights:\n  automated: 0.6\n  llm_judge: 0.4\nsessions:\n- First prompt\n- prompt: |-\n    Second\n  new_session: true\n",
    )
    .unwrap();
    assert_eq!(s(y.get("id")), "task_08_memory");
    assert_eq!(s(y.get("name")), "Quoted: yes");
    assert_eq!(s(y.get("grading_type")), "automated");
    assert_eq!(y.get("empty"), Some(&Yaml::Seq(vec![])));
    let Some(Yaml::Seq(files)) = y.get("workspace_files") else {
        panic!("{y:?}")
    };
    assert_eq!(
        s(files[0].get("content")),
        "# Title\n\n- item\n  indented\n"
    );
    assert_eq!(s(files[1].get("dest")), "it's.txt");
    assert_eq!(s(y.get("grading_weights").unwrap().get("llm_judge")), "0.4");
    let Some(Yaml::Seq(sessions)) = y.get("sessions") else {
        panic!("{y:?}")
    };
    assert_eq!(sessions[0].as_str(), Some("First prompt"));
    assert_eq!(s(sessions[1].get("prompt")), "Second");
    assert_eq!(s(sessions[1].get("new_session")), "true");
}

#[test]
fn what_the_reader_does_not_know_is_refused_with_its_line() {
    for (text, line) in [
        ("a: &anchor x\n", 2),
        ("a: >\n  folded\n", 2),
        ("a: {b: 1}\n", 2),
        ("a: 1\na: 2\n", 3),
        ("a: \"open\n", 2),
        ("a:\n  - x\n    y: 1\n", 4),
    ] {
        let err = yaml(text).unwrap_err();
        assert_eq!(err.0, Some(line), "{text:?}: {err:?}");
    }
}

/// `---`, `body` as the front matter, `---`, and a prompt.
fn task_file(body: &str) -> String {
    format!("---\n{body}---\n\n## Prompt\n\nDo it.\n")
}

fn keys(n: usize) -> String {
    (0..n).map(|i| format!("k{i}: {i}\n")).collect()
}

#[test]
fn a_mapping_of_many_keys_is_read_in_linear_time() {
    // 50,000 keys cost 1.25 billion key comparisons with a scan per key; with a hash set a
    // few milliseconds. The time bound is a generous regression guard.
    let text = task_file(&keys(MAX_NODES));
    let started = std::time::Instant::now();
    let doc = parse_document(&text).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(s(doc.front_matter.get("k49999")), "49999");
    assert!(
        elapsed.as_secs_f64() < 2.0,
        "{MAX_NODES} keys took {elapsed:?}"
    );
}

#[test]
fn three_hundred_thousand_keys_are_refused_by_the_size_bound_at_once() {
    let text = task_file(&keys(300_000));
    let started = std::time::Instant::now();
    let err = parse_document(&text).unwrap_err();
    assert!(
        started.elapsed().as_secs_f64() < 2.0,
        "{:?}",
        started.elapsed()
    );
    assert!(err.1.contains("bytes"), "{err:?}");
    let line = err.0.unwrap();
    // The line where the bound was passed: past the first MiB, well before the end.
    assert!(line > 50_000 && line < 200_000, "{err:?}");
}

#[test]
fn more_keys_than_the_bound_are_refused_with_the_line() {
    let err = parse_document(&task_file(&keys(MAX_NODES + 10))).unwrap_err();
    assert!(err.1.contains("keys and list items"), "{err:?}");
    // Key number MAX_NODES + 1 (0-based MAX_NODES) is on line MAX_NODES + 2.
    assert_eq!(err.0, Some(MAX_NODES + 2), "{err:?}");
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    // `- - - … x` on one line: 100,000 nested lists in 200 kB.
    let line = format!("a:\n  {}x\n", "- ".repeat(100_000));
    let Err(err) = parse_document(&task_file(&line)) else {
        panic!("100,000 nested lists were accepted");
    };
    assert!(err.1.contains("deeper than"), "{err:?}");
    // Block mappings, one space deeper per level.
    let nested: String = (0..1_000)
        .map(|i| format!("{}a:\n", " ".repeat(i)))
        .collect();
    let lines: Vec<&str> = nested.lines().collect();
    let err = parse_yaml(&lines, 2).unwrap_err();
    assert_eq!(err.0, Some(2 + MAX_DEPTH), "{err:?}");
    // Up to the bound is read.
    let ok: String = (0..MAX_DEPTH)
        .map(|i| format!("{}a:\n", " ".repeat(i)))
        .collect();
    let lines: Vec<&str> = ok.lines().collect();
    assert!(parse_yaml(&lines, 2).is_ok());
}
