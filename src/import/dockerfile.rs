//! The Dockerfiles envcraft runs without a builder: `FROM` (one stage), `WORKDIR`, `COPY`
//! (and `ADD` of local files), `ENV` and `ARG`, with comments and line continuations. Read
//! into a [`Dockerfile`]: the base image, the final working directory, the variables, and each
//! copy with its destination made absolute. Steps that only describe the container
//! (`CMD`, `ENTRYPOINT`, `EXPOSE`, `LABEL`, `USER`, ...) are kept as notes, said, not acted on;
//! a step that needs a builder (`RUN`, `ONBUILD`, a second `FROM`, `COPY --from`, `ADD` of a
//! URL or an archive) is refused naming its line and its words.
//!
//! Pure: text in, a value or a [`DockerfileError`] out; the importer resolves the copies'
//! sources in the build context.

use std::collections::BTreeMap;

/// A Dockerfile read as far as envcraft runs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dockerfile {
    /// `FROM IMAGE` (variables substituted); `None` when there is no `FROM`.
    pub from: Option<String>,
    /// The last `WORKDIR`, absolute; `None` when there is none.
    pub workdir: Option<String>,
    /// `ENV` variables in the order first set (a later `ENV` replaces the value).
    pub env: Vec<(String, String)>,
    pub copies: Vec<CopyStep>,
    /// What was read but is not acted on, for people.
    pub notes: Vec<String>,
}

/// One `COPY` (or `ADD` of local files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyStep {
    /// 1-based line of the instruction.
    pub line: usize,
    /// The sources, relative to the build context, as written.
    pub sources: Vec<String>,
    /// Where they go, absolute (a relative destination joined to the `WORKDIR` of its time).
    pub dest: String,
    /// Whether `dest` names a directory (it ends in `/`, or there are several sources).
    pub dest_is_dir: bool,
}

/// Why a Dockerfile cannot run without a builder, or does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: `{step}` {problem}")]
pub struct DockerfileError {
    pub line: usize,
    /// The instruction's words, shortened.
    pub step: String,
    pub problem: String,
}

impl DockerfileError {
    /// Whether an image builder could run the step (a `RUN`, a second stage, a wildcard, ...),
    /// as opposed to a Dockerfile that does not read as one.
    pub fn needs_builder(&self) -> bool {
        self.problem.contains("needs a builder") || self.problem.contains("wildcards")
    }
}

const NEEDS_BUILDER: &str = "needs a builder: envcraft runs a Dockerfile of FROM, WORKDIR, COPY, ENV and ARG steps only (build the image elsewhere and `envcraft image import` it, then name it in task.toml's docker_image)";

/// Instructions that describe the container and change no file: said, not acted on.
const DESCRIPTIVE: [(&str, &str); 10] = [
    ("CMD", "the sandbox runs the agent's commands, not a CMD"),
    (
        "ENTRYPOINT",
        "the sandbox runs the agent's commands, not an ENTRYPOINT",
    ),
    (
        "EXPOSE",
        "ports are not published (the sandbox has no network)",
    ),
    ("LABEL", "labels are not kept"),
    ("MAINTAINER", "not kept"),
    ("STOPSIGNAL", "sessions are stopped by envcraft"),
    ("HEALTHCHECK", "not run"),
    ("SHELL", "only RUN steps would use it, and there are none"),
    (
        "VOLUME",
        "the workspace is the only writable tree besides /tmp and Harbor's paths",
    ),
    (
        "USER",
        "commands run as the sandbox's root (uid 0 in its own user namespace)",
    ),
];

/// Read `text`.
pub fn parse(text: &str) -> Result<Dockerfile, DockerfileError> {
    let mut out = Dockerfile::default();
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut workdir = String::from("/");
    let mut has_workdir = false;
    for (line, logical) in logical_lines(text)? {
        let (word, rest) = match logical.split_once(char::is_whitespace) {
            Some((w, r)) => (w, r.trim()),
            None => (logical.as_str(), ""),
        };
        let instruction = word.to_ascii_uppercase();
        let fail = |problem: String| DockerfileError {
            line,
            step: shorten(&logical),
            problem,
        };
        match instruction.as_str() {
            "FROM" => {
                if out.from.is_some() {
                    return Err(fail(format!(
                        "is a second stage (a multi-stage build) and {NEEDS_BUILDER}"
                    )));
                }
                let mut words: Vec<String> = split_words(rest)
                    .into_iter()
                    .map(|w| substitute(&w, &|n| lookup(&vars, &args, n)))
                    .collect();
                if let Some(flag) = words.iter().find(|w| w.starts_with("--")) {
                    out.notes.push(format!(
                        "line {line}: FROM's `{flag}` is not applied (the root is this machine's platform)"
                    ));
                }
                words.retain(|w| !w.starts_with("--"));
                let image = match words.as_slice() {
                    [image] => image.clone(),
                    [image, kw, _name] if kw.eq_ignore_ascii_case("as") => image.clone(),
                    _ => return Err(fail("does not read as `FROM IMAGE [AS NAME]`".into())),
                };
                if image.is_empty() || image == "scratch" {
                    return Err(fail(format!(
                        "starts from an empty root, which {NEEDS_BUILDER}"
                    )));
                }
                out.from = Some(image);
            }
            "ARG" => {
                for word in split_words(rest) {
                    match word.split_once('=') {
                        Some((name, value)) => {
                            let value = substitute(value, &|n| lookup(&vars, &args, n));
                            args.insert(name.to_string(), value);
                        }
                        None => {
                            args.entry(word).or_default();
                        }
                    }
                }
            }
            "ENV" => {
                for (name, value) in env_pairs(rest).map_err(fail)? {
                    let value = substitute(&value, &|n| lookup(&vars, &args, n));
                    vars.insert(name.clone(), value.clone());
                    match out.env.iter_mut().find(|(n, _)| *n == name) {
                        Some(slot) => slot.1 = value,
                        None => out.env.push((name, value)),
                    }
                }
            }
            "WORKDIR" => {
                let dir = substitute(rest.trim(), &|n| lookup(&vars, &args, n));
                if dir.is_empty() {
                    return Err(fail("names no directory".into()));
                }
                workdir = join_abs(&workdir, &dir);
                has_workdir = true;
            }
            "COPY" | "ADD" => {
                let mut words = match rest.trim_start().starts_with('[') {
                    true => serde_json::from_str::<Vec<String>>(rest.trim())
                        .map_err(|e| fail(format!("is not a JSON array of strings: {e}")))?,
                    false => split_words(rest),
                };
                let flags: Vec<String> = words
                    .iter()
                    .take_while(|w| w.starts_with("--"))
                    .cloned()
                    .collect();
                words.drain(..flags.len());
                for flag in &flags {
                    let name = flag.split('=').next().unwrap_or(flag);
                    match name {
                        "--chown" | "--link" => {}
                        "--chmod" => out.notes.push(format!(
                            "line {line}: `{flag}` is not applied: the files keep the modes they have in the task's directory"
                        )),
                        _ => {
                            return Err(fail(format!(
                                "uses `{name}`, which {NEEDS_BUILDER}"
                            )));
                        }
                    }
                }
                let words: Vec<String> = words
                    .iter()
                    .map(|w| substitute(w, &|n| lookup(&vars, &args, n)))
                    .collect();
                let Some((dest, sources)) = words.split_last() else {
                    return Err(fail("names no source and destination".into()));
                };
                if sources.is_empty() {
                    return Err(fail("names no source".into()));
                }
                for source in sources {
                    if instruction == "ADD" && (source.contains("://") || is_archive(source)) {
                        return Err(fail(format!(
                            "fetches or unpacks `{source}`, which {NEEDS_BUILDER}"
                        )));
                    }
                    if source.contains(['*', '?', '[']) {
                        return Err(fail(format!(
                            "copies the pattern `{source}`; name the files or directories instead (wildcards are not expanded)"
                        )));
                    }
                }
                out.copies.push(CopyStep {
                    line,
                    sources: sources.to_vec(),
                    dest_is_dir: dest.ends_with('/') || sources.len() > 1,
                    dest: join_abs(&workdir, dest),
                });
            }
            "RUN" | "ONBUILD" => return Err(fail(NEEDS_BUILDER.into())),
            other => match DESCRIPTIVE.iter().find(|(name, _)| *name == other) {
                Some((name, why)) => out
                    .notes
                    .push(format!("line {line}: {name} ignored: {why}")),
                None => return Err(fail("is not a Dockerfile instruction".into())),
            },
        }
    }
    out.workdir = has_workdir.then_some(workdir);
    Ok(out)
}

/// The working directory of the last stage of a Dockerfile that needs a builder: its last
/// `WORKDIR` after the last `FROM`, made absolute; `None` when it has none, or when it names
/// a variable (only the builder knows its value).
pub fn last_workdir(text: &str) -> Option<String> {
    let mut workdir: Option<String> = None;
    for (_, logical) in logical_lines(text).ok()? {
        let (word, rest) = logical
            .split_once(char::is_whitespace)
            .unwrap_or((logical.as_str(), ""));
        match word.to_ascii_uppercase().as_str() {
            "FROM" => workdir = None,
            "WORKDIR" => {
                let dir = rest.trim();
                if dir.contains('$') {
                    return None;
                }
                workdir = Some(join_abs(workdir.as_deref().unwrap_or("/"), dir));
            }
            _ => {}
        }
    }
    workdir
}

/// A variable's value: `ENV`'s, else `ARG`'s.
fn lookup(
    vars: &BTreeMap<String, String>,
    args: &BTreeMap<String, String>,
    name: &str,
) -> Option<String> {
    vars.get(name).or_else(|| args.get(name)).cloned()
}

/// The instructions of `text` with their first line: comments and blank lines dropped,
/// continuations (`\` at a line's end) joined. A `# escape=` directive other than `\` is
/// refused.
fn logical_lines(text: &str) -> Result<Vec<(usize, String)>, DockerfileError> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut directives = true;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if directives && let Some(directive) = trimmed.strip_prefix('#') {
            let directive = directive.trim().to_ascii_lowercase();
            if let Some(value) = directive.strip_prefix("escape=")
                && value.trim() != "\\"
            {
                return Err(DockerfileError {
                    line,
                    step: shorten(trimmed),
                    problem: "changes the escape character, which envcraft does not read".into(),
                });
            }
            continue;
        }
        directives = false;
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (body, continues) = match trimmed.strip_suffix('\\') {
            Some(body) => (body, true),
            None => (trimmed, false),
        };
        match &mut current {
            Some((_, text)) => {
                text.push(' ');
                text.push_str(body.trim());
            }
            None => current = Some((line, body.trim().to_string())),
        }
        if !continues && let Some(done) = current.take() {
            out.push(done);
        }
    }
    out.extend(current);
    Ok(out)
}

/// Words split at white space, `"..."` and `'...'` quoting kept together (quotes removed).
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (_, '\\') if quote != Some('\'') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// `ENV`'s pairs: `K=V K2="v 2"`, or the older `ENV K the rest`.
fn env_pairs(rest: &str) -> Result<Vec<(String, String)>, String> {
    let first = rest.split_whitespace().next().unwrap_or_default();
    if !first.contains('=') {
        let value = rest[first.len()..].trim();
        if first.is_empty() {
            return Err("names no variable".into());
        }
        return Ok(vec![(first.to_string(), value.to_string())]);
    }
    split_words(rest)
        .into_iter()
        .map(|w| match w.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("has `{w}`, not NAME=VALUE")),
        })
        .collect()
}

/// `$NAME`, `${NAME}`, `${NAME:-default}` and `${NAME:+alternative}` replaced (unknown names:
/// empty, as Docker does).
fn substitute(text: &str, known: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(inner) = after.strip_prefix('{')
            && let Some(end) = inner.find('}')
        {
            let expr = &inner[..end];
            let value = match (expr.split_once(":-"), expr.split_once(":+")) {
                (Some((name, default)), _) => known(name)
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| default.to_string()),
                (None, Some((name, alternative))) => match known(name) {
                    Some(v) if !v.is_empty() => alternative.to_string(),
                    _ => String::new(),
                },
                (None, None) => known(expr).unwrap_or_default(),
            };
            out.push_str(&value);
            rest = &inner[end + 1..];
            continue;
        }
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len == 0 {
            out.push('$');
            rest = after;
            continue;
        }
        out.push_str(&known(&after[..name_len]).unwrap_or_default());
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

/// `path` made absolute against `base` (both absolute results), `.` and `..` resolved.
fn join_abs(base: &str, path: &str) -> String {
    let joined = match path.starts_with('/') {
        true => path.to_string(),
        false => format!("{base}/{path}"),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = format!("/{}", parts.join("/"));
    if path.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

fn is_archive(source: &str) -> bool {
    [
        ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tar.xz", ".tbz2", ".txz",
    ]
    .iter()
    .any(|ext| source.to_ascii_lowercase().ends_with(ext))
}

fn shorten(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn from_workdir_copy_env_and_arg_are_read() {
        let text = "# syntax=docker/dockerfile:1\nARG BASE=ubuntu:24.04\nFROM $BASE AS main\n\
                    WORKDIR /app\nENV A=1 B=\"two words\"\nENV C three\nCOPY data/ ./data/\n\
                    COPY a.txt b.txt \\\n  sub/\nWORKDIR src\nCMD [\"sleep\", \"infinity\"]\n";
        let d = parse(text).unwrap();
        assert_eq!(d.from.as_deref(), Some("ubuntu:24.04"));
        assert_eq!(d.workdir.as_deref(), Some("/app/src"));
        assert_eq!(
            d.env,
            [("A", "1"), ("B", "two words"), ("C", "three")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert_eq!(d.copies[0].dest, "/app/data/");
        assert!(d.copies[0].dest_is_dir);
        assert_eq!(d.copies[1].sources, ["a.txt", "b.txt"]);
        assert_eq!(d.copies[1].dest, "/app/sub/");
        assert_eq!(d.copies[1].line, 8);
        assert!(
            d.notes.iter().any(|n| n.contains("CMD ignored")),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn steps_that_need_a_builder_are_refused_naming_the_line_and_the_step() {
        for (text, line, words) in [
            (
                "FROM debian\nRUN apt-get install -y curl\n",
                2,
                "RUN apt-get",
            ),
            ("FROM a AS x\nFROM b\n", 2, "FROM b"),
            ("FROM a\nCOPY --from=x /a /b\n", 2, "COPY --from"),
            ("FROM a\nADD https://x.org/f /f\n", 2, "ADD https"),
            ("FROM a\nADD pkg.tar.gz /opt/\n", 2, "ADD pkg"),
            ("FROM scratch\n", 1, "FROM scratch"),
            ("FROM a\nFLY away\n", 2, "FLY"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.line, line, "{text}");
            assert!(err.to_string().contains(words), "{err}");
        }
        let err = parse("FROM a\nRUN x\n").unwrap_err();
        assert!(err.to_string().contains("needs a builder"), "{err}");
    }

    #[test]
    fn the_last_stage_gives_the_working_directory() {
        let text =
            "FROM a AS b\nWORKDIR /build\nRUN make\nFROM c\nWORKDIR /app\nWORKDIR src\nRUN x\n";
        assert_eq!(last_workdir(text).as_deref(), Some("/app/src"));
        assert_eq!(last_workdir("FROM a\nWORKDIR /x\nFROM b\n"), None);
        assert_eq!(last_workdir("FROM a\nWORKDIR $HOME\n"), None);
        assert!(parse("FROM a\nRUN x\n").unwrap_err().needs_builder());
        assert!(!parse("FROM a\nFLY x\n").unwrap_err().needs_builder());
    }

    #[test]
    fn substitution_and_paths() {
        let known = |n: &str| (n == "X").then(|| "x".to_string());
        assert_eq!(
            substitute("$X/${X}/${Y:-d}/${X:+alt}/$$", &known),
            "x/x/d/alt/$$"
        );
        assert_eq!(join_abs("/app", "../srv/./a/"), "/srv/a/");
        assert_eq!(join_abs("/app", "/abs"), "/abs");
    }
}
