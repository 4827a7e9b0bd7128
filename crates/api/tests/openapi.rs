//! The OpenAPI document is generated from the handlers and their types
//! (utoipa). `docs/openapi.json` is checked in; these fail when it is not
//! what corrald generates, and when the generated operations and the
//! router's route table differ, in either direction.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use corral_api::routes::routes;
use serde_json::Value;

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

fn spec() -> Value {
    serde_json::from_str(&corral_api::openapi::json()).unwrap()
}

#[test]
fn the_checked_in_document_is_the_generated_one() {
    let file = std::fs::read_to_string(SPEC).unwrap_or_else(|e| panic!("{SPEC}: {e}"));
    assert!(
        file == corral_api::openapi::json(),
        "docs/openapi.json is not what corrald generates; regenerate it:\n  cargo run -p corral-api --bin corrald -- --openapi > docs/openapi.json"
    );
}

#[test]
fn spec_operations_equal_the_router() {
    let spec = spec();
    assert!(spec["openapi"].as_str().unwrap().starts_with("3."));
    let mut documented = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if METHODS.contains(&method.as_str()) {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let served: BTreeSet<(String, String)> = routes()
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_owned()))
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "docs/openapi.json and the router differ.\n  served but not in the spec: {undocumented:?}\n  in the spec but not served: {unserved:?}"
    );
}

#[test]
fn every_path_parameter_is_declared_and_every_ref_resolves() {
    let spec = spec();
    let schemas = spec["components"]["schemas"].as_object().unwrap();
    for (path, item) in spec["paths"].as_object().unwrap() {
        let params: BTreeSet<&str> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        for (method, op) in item.as_object().unwrap() {
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "path")
                        .filter_map(|p| p["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(declared, params, "{method} {path}");
            assert!(
                !op["responses"].as_object().unwrap().is_empty(),
                "{method} {path}"
            );
        }
    }
    // Every "$ref" anywhere names a schema that exists.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&spec, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap();
        assert!(schemas.contains_key(name), "dangling $ref {r}");
    }
}
