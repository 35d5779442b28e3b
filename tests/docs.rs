//! Docs that cannot drift: every flag of every subcommand is in `docs/cli.md`, every route in
//! `docs/http-api.md`, every built-in tool in `docs/sessions.md`, every key of the bundled
//! policies in `docs/policies.md` (named in backquotes, or as `key =` in its annotated file),
//! and every page the README or a page of `docs/` links to exists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use clap::CommandFactory;

fn page(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_flag_of_every_subcommand_is_in_the_cli_reference() {
    let cli = page("docs/cli.md");
    let mut missing = Vec::new();
    let root = envcraft::cli::Cli::command();
    for global in root.get_arguments().filter_map(|a| a.get_long()) {
        if !cli.contains(&format!("--{global}")) {
            missing.push(format!("envcraft --{global}"));
        }
    }
    for sub in root.get_subcommands() {
        if !cli.contains(&format!("envcraft {}", sub.get_name())) {
            missing.push(format!("envcraft {}", sub.get_name()));
        }
        for arg in sub.get_arguments() {
            if let Some(long) = arg.get_long()
                && !["help", "version"].contains(&long)
                && !cli.contains(&format!("--{long}"))
            {
                missing.push(format!("envcraft {} --{long}", sub.get_name()));
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/cli.md: {missing:?}");
}

#[test]
fn every_route_is_in_the_http_reference() {
    let http = page("docs/http-api.md");
    let missing: Vec<String> = envcraft::server::routes::ROUTES
        .iter()
        .chain(envcraft::server::routes::SIMULATION_ROUTES)
        .map(|r| format!("{} {}", r.method.openapi_name().to_uppercase(), r.path))
        .filter(|r| !http.contains(r.as_str()))
        .collect();
    assert!(missing.is_empty(), "not in docs/http-api.md: {missing:?}");
}

#[test]
fn every_built_in_tool_is_in_the_sessions_page() {
    let sessions = page("docs/sessions.md");
    let missing: Vec<&str> = envcraft::tools::TOOLS
        .iter()
        .map(|t| t.name)
        .filter(|name| !sessions.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "not in docs/sessions.md: {missing:?}");
}

#[test]
fn every_key_of_the_bundled_policies_is_in_the_policies_page() {
    let policies = page("docs/policies.md");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")).unwrap()
    {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let table: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        for (section, value) in &table {
            let keys: Vec<&String> = match value {
                toml::Value::Table(t) => t.keys().collect(),
                _ => vec![section],
            };
            for key in keys {
                let documented = policies.contains(&format!("`{key}`"))
                    || policies.lines().any(|l| l.starts_with(&format!("{key} =")));
                if !documented {
                    missing.push(format!("{}: {section}.{key}", path.display()));
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "not in docs/policies.md: {missing:?}");
}

/// The local files a Markdown page links to (`[text](target)`, anchors dropped), as written.
fn local_links(text: &str) -> Vec<&str> {
    let mut links = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].split('#').next().unwrap_or_default();
        if !target.is_empty() && !target.contains("://") && !target.contains(' ') {
            links.push(target);
        }
    }
    links
}

#[test]
fn every_page_the_readme_links_to_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for target in local_links(&page("README.md")) {
        assert!(
            root.join(target).exists(),
            "README links to {target}, which does not exist"
        );
    }
}

/// A page of docs/ once linked to `capacity.md`, a page that never existed.
#[test]
fn every_page_a_doc_links_to_exists() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut broken = Vec::new();
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for target in local_links(&text) {
            if !docs.join(target).exists() {
                broken.push(format!("{} -> {target}", path.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to pages that do not exist: {broken:#?}"
    );
}
