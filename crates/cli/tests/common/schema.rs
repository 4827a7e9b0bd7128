//! Checks a command's JSON against docs/json-schema.md: every field in the
//! output must be documented at its path, and every field documented as
//! *always* must be present. The doc's tables are the source of truth.

use std::collections::BTreeMap;

use serde_json::Value;

/// The documentation, read at compile time so the test binary carries it.
const DOC: &str = include_str!("../../../../docs/json-schema.md");

/// Pseudo-schema of the shared "Drift items" table (path `drift[]`).
const DRIFT: &str = "*drift";

/// One documented field.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    always: bool,
}

/// schema id → path (`""` for the top level, `entries[]`, `entries[].enforcement`) → fields.
fn parse() -> BTreeMap<String, BTreeMap<String, Vec<Field>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<Field>>> = BTreeMap::new();
    let mut schema: Option<String> = None;
    let mut path = String::new();
    for line in DOC.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            path.clear();
            schema = (title.trim() == "Drift items").then(|| DRIFT.to_owned());
            if schema.is_some() {
                path = "drift[]".to_owned();
            }
        } else if let Some(rest) = line.strip_prefix("Schema id: `") {
            schema = rest.split('`').next().map(str::to_owned);
        } else if let Some(rest) = line.strip_prefix("### `") {
            path = rest.split('`').next().unwrap_or_default().to_owned();
        } else if let (Some(s), Some(rest)) = (&schema, line.strip_prefix("| `")) {
            let name = rest.split('`').next().unwrap_or_default().to_owned();
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // | `name` | type | present | meaning |
            let always = cells.get(3).is_some_and(|c| *c == "always");
            out.entry(s.clone())
                .or_default()
                .entry(path.clone())
                .or_default()
                .push(Field { name, always });
        }
    }
    out
}

/// The objects found at `path` under `root` (`a[]` walks an array, `a.b` a
/// member; nulls are skipped).
fn objects_at<'a>(root: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![root];
    if path.is_empty() {
        return current;
    }
    for step in path.split('.') {
        let (name, each) = match step.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (step, false),
        };
        let mut next = Vec::new();
        for v in current {
            match v.get(name) {
                Some(Value::Array(items)) if each => next.extend(items.iter()),
                Some(Value::Null) | None => {}
                Some(other) if !each => next.push(other),
                Some(other) => panic!("`{name}` should be an array: {other}"),
            }
        }
        current = next;
    }
    current
}

/// Assert that `value` matches the documentation of its `schema` field.
pub fn check(value: &Value) {
    let id = value["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("JSON without a `schema` field: {value}"));
    check_as(value, id);
}

/// Assert that `value` matches the documentation of schema `id` (for
/// records that carry no `schema` field, such as audit lines).
#[allow(dead_code)]
pub fn check_as(value: &Value, id: &str) {
    let docs = parse();
    let mut paths = docs
        .get(id)
        .unwrap_or_else(|| panic!("schema `{id}` is not documented in docs/json-schema.md"))
        .clone();
    let has_drift_list = paths
        .get("")
        .is_some_and(|top| top.iter().any(|f| f.name == "drift"))
        && value["drift"].is_array();
    if has_drift_list {
        paths.extend(docs.get(DRIFT).cloned().unwrap_or_default());
    }
    for (path, fields) in &paths {
        for obj in objects_at(value, path) {
            let map = obj
                .as_object()
                .unwrap_or_else(|| panic!("{id} {path}: not an object: {obj}"));
            for key in map.keys() {
                assert!(
                    fields.iter().any(|f| &f.name == key),
                    "{id}: field `{key}` at `{path}` is not documented in docs/json-schema.md: {obj}"
                );
            }
            for f in fields.iter().filter(|f| f.always) {
                assert!(
                    map.contains_key(&f.name),
                    "{id}: documented field `{}` missing at `{path}`: {obj}",
                    f.name
                );
            }
        }
    }
}

#[test]
fn the_document_parses_into_every_schema() {
    let docs = parse();
    for id in [
        "corral.matrix.v1",
        "corral.profiles.v1",
        "corral.config-check.v1",
        "corral.host-plan.v1",
        "corral.host-verify.v1",
        "corral.host-apply.v1",
        "corral.host-status.v1",
        "corral.host-refresh.v1",
        "corral.host-teardown.v1",
        "corral.drill.v1",
        "corral.sandbox-new.v1",
        "corral.sandbox-list.v1",
        "corral.sandbox-info.v1",
        "corral.sandbox-action.v1",
        "corral.verify.v1",
        "corral.events.v1",
        "corral.gate.v1",
        "corral.templates.v1",
        "corral.template.v1",
        "corral.sandbox-snapshot.v1",
        "corral.sandbox-restore.v1",
        "corral.sandbox-rename.v1",
        "corral.sandbox-export.v1",
        "corral.sandbox-import.v1",
        "corral.sandbox-push.v1",
        "corral.sandbox-pull.v1",
        "corral.audit.v1",
        DRIFT,
    ] {
        assert!(
            docs.contains_key(id),
            "{id} not found in docs/json-schema.md"
        );
        assert!(
            docs[id].values().any(|f| !f.is_empty()),
            "{id} has no fields"
        );
    }
}
