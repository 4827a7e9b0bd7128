//! `corral drill` with the real binary, as root: the drill passes with every
//! probe listed, its first line says what it proves, its last line is the
//! verdict with counts; `--output FILE` and `--json` (stdout) are the same
//! parseable record.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{assert_fields, corral, schema};

#[test]
fn drill_passes_with_every_probe_listed() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("drill.json");
    let run = corral(&["drill", "--output", record.to_str().unwrap()]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("corral drill:") && l.contains("proved")),
        "first line must say what the drill proves:\n{}",
        run.stdout
    );
    let last = lines.last().copied().unwrap_or_default();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_fields(
        &json,
        &[
            "schema",
            "claim",
            "source",
            "profiles",
            "verdict",
            "probes",
            "passed",
            "failed",
            "not_run",
            "errors",
            "ms",
            "rows",
            "attack_classes",
        ],
        "drill record",
    );
    // The ten attack classes are named after the table, one line each.
    let classes = json["attack_classes"].as_array().unwrap();
    assert_eq!(classes.len(), 10);
    let class_lines = &lines[lines.len() - 11..lines.len() - 1];
    for (line, c) in class_lines.iter().zip(classes) {
        let title = c["title"].as_str().unwrap();
        assert!(
            line.starts_with(&format!("attack {} ({title})", c["class"])),
            "{line} vs {c}"
        );
    }
    schema::check(&json);
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), json["probes"].as_u64().unwrap() as usize);
    // Every probe of the record is a row of the table (the header is the
    // third line, after the claim and the profile list).
    let table: Vec<&str> = lines[3..lines.len() - 11].to_vec();
    assert_eq!(
        table.len(),
        rows.len(),
        "table rows vs JSON rows:\n{}",
        run.stdout
    );
    for (line, row) in table.iter().zip(rows) {
        assert_fields(
            row,
            &[
                "probe",
                "from",
                "to",
                "expected",
                "observed",
                "observed_detail",
                "control",
                "verdict",
                "ms",
            ],
            "drill row",
        );
        assert!(
            line.starts_with(row["probe"].as_str().unwrap()),
            "{line} vs {row}"
        );
        assert!(
            line.contains(row["to"].as_str().unwrap()),
            "{line} vs {row}"
        );
    }
    // Every built-in profile is probed.
    for profile in ["isolated", "internet", "allowlist"] {
        assert!(
            rows.iter()
                .any(|r| r["from"].as_str().unwrap().starts_with(profile)),
            "no probe from {profile}"
        );
    }
    let not_passed: Vec<_> = rows.iter().filter(|r| r["verdict"] != "pass").collect();
    assert!(
        not_passed.is_empty() && run.code == Some(0),
        "the drill must pass (exit {:?}); last line: {last}\nrows that did not pass: {not_passed:#?}",
        run.code
    );
    assert!(last.starts_with("PASS: "), "{last}");
    assert!(last.contains(&format!("{} passed", rows.len())), "{last}");
    assert_eq!(json["verdict"], "pass");
}

#[test]
fn drill_json_on_stdout_is_only_json() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let run = corral(&["drill", "--json"]);
    let json = run.json();
    assert_eq!(json["schema"], "corral.drill.v1");
    schema::check(&json);
    // The exit code agrees with the record's verdict.
    assert_eq!(
        run.code == Some(0),
        json["verdict"] == "pass",
        "{:?} vs {}",
        run.code,
        json["verdict"]
    );
}
