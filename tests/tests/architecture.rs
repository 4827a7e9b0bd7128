//! docs/architecture.md's table of crates and their arrows is the
//! workspace's: every member has a row, each row's last column lists
//! exactly its normal dependencies among corral crates (from `cargo
//! metadata`), arrows point down the table, and the forbidden arrows the
//! page states are absent. Controls: the same checks report an edge added
//! behind the doc's back, an edge the doc drops, and each forbidden arrow.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crate short name (`egress`, `tests`) → its normal and build
/// dependencies among workspace members, by short name.
type Edges = BTreeMap<String, BTreeSet<String>>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A member's short name: its directory's (`crates/egress` → `egress`).
fn short(manifest: &str) -> String {
    let dir = Path::new(manifest).parent().unwrap();
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

fn metadata_edges() -> Edges {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let by_name: BTreeMap<&str, String> = packages
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                short(p["manifest_path"].as_str().unwrap()),
            )
        })
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() || d["kind"] == "build")
                .filter_map(|d| by_name.get(d["name"].as_str().unwrap()).cloned())
                .collect();
            (short(p["manifest_path"].as_str().unwrap()), deps)
        })
        .collect()
}

/// The table's rows in order: short name and listed dependencies.
fn doc_rows(doc: &str) -> Vec<(String, BTreeSet<String>)> {
    let section = doc
        .split("## Crates and arrows")
        .nth(1)
        .expect("docs/architecture.md has a `## Crates and arrows` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 3, "a table row has three cells: {line}");
            let path = cells[0].trim_matches('`');
            let name = path.rsplit('/').next().unwrap().to_owned();
            let deps = without_parentheses(cells[2])
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty() && *d != "—")
                .map(str::to_owned)
                .collect();
            (name, deps)
        })
        .collect()
}

/// `text` without its parenthetical remarks (`test-support (optional, …)`).
fn without_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|c| match c {
            '(' => {
                depth += 1;
                false
            }
            ')' => {
                depth = depth.saturating_sub(1);
                false
            }
            _ => depth == 0,
        })
        .collect()
}

/// Where the doc and the workspace differ.
fn differences(rows: &[(String, BTreeSet<String>)], edges: &Edges) -> Vec<String> {
    let mut out = Vec::new();
    let order: BTreeMap<&str, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();
    for name in edges.keys() {
        if !order.contains_key(name.as_str()) {
            out.push(format!("`{name}` is a workspace member without a row"));
        }
    }
    for (i, (name, listed)) in rows.iter().enumerate() {
        let Some(actual) = edges.get(name) else {
            out.push(format!("row `{name}` is not a workspace member"));
            continue;
        };
        for d in actual.difference(listed) {
            out.push(format!(
                "{name} → {d} is in Cargo.toml but not in the table"
            ));
        }
        for d in listed.difference(actual) {
            out.push(format!(
                "{name} → {d} is in the table but not in Cargo.toml"
            ));
        }
        for d in actual {
            if order.get(d.as_str()).is_some_and(|&j| j >= i) {
                out.push(format!("{name} → {d} points up the table"));
            }
        }
    }
    out
}

/// The arrows docs/architecture.md forbids, as found in `edges`.
fn forbidden(edges: &Edges) -> Vec<String> {
    let mut out = Vec::new();
    let has = |from: &str, to: &str| edges.get(from).is_some_and(|d| d.contains(to));
    for leaf in ["sandbox-core", "state-files", "test-support", "probes"] {
        if let Some(d) = edges.get(leaf).filter(|d| !d.is_empty()) {
            out.push(format!("{leaf} imports corral crates {d:?}"));
        }
    }
    for p in edges.keys().filter(|k| k.starts_with("provider-")) {
        if has(p, "egress") {
            out.push(format!("provider {p} imports egress"));
        }
    }
    if has("cli", "api") || has("api", "cli") {
        out.push("cli and api import each other".to_owned());
    }
    for (from, deps) in edges {
        let lab_users = ["drill", "cli", "tests"];
        if deps.contains("drill") && !lab_users.contains(&from.as_str()) {
            out.push(format!("product crate {from} imports drill"));
        }
    }
    out
}

fn doc() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).unwrap()
}

#[test]
fn the_table_matches_cargo_metadata_and_no_forbidden_arrow_exists() {
    let edges = metadata_edges();
    assert!(edges.contains_key("service") && edges.contains_key("probes"));
    let rows = doc_rows(&doc());
    let diff = differences(&rows, &edges);
    assert!(
        diff.is_empty(),
        "docs/architecture.md differs:\n{}",
        diff.join("\n")
    );
    let bad = forbidden(&edges);
    assert!(bad.is_empty(), "forbidden arrows:\n{}", bad.join("\n"));
}

/// Control: the checks see what they are meant to see.
#[test]
fn an_edge_out_of_step_and_every_forbidden_arrow_are_reported() {
    let edges = metadata_edges();
    let rows = doc_rows(&doc());
    let mut more = edges.clone();
    more.get_mut("service").unwrap().insert("drill".to_owned());
    more.get_mut("provider-tart")
        .unwrap()
        .insert("egress".to_owned());
    more.get_mut("api").unwrap().insert("cli".to_owned());
    more.get_mut("probes").unwrap().insert("egress".to_owned());
    let diff = differences(&rows, &more);
    assert!(
        diff.iter()
            .any(|d| d == "service → drill is in Cargo.toml but not in the table"),
        "{diff:?}"
    );
    assert!(
        diff.iter()
            .any(|d| d == "probes → egress points up the table")
    );
    let bad = forbidden(&more);
    assert_eq!(bad.len(), 4, "{bad:?}");
    let mut fewer = rows.clone();
    fewer
        .iter_mut()
        .find(|(n, _)| n == "service")
        .unwrap()
        .1
        .remove("probes");
    assert_eq!(
        differences(&fewer, &edges),
        ["service → probes is in Cargo.toml but not in the table"]
    );
}
