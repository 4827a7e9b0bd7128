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
    // The twelve attack classes of docs/security.md ("L3/L4", 11 and 12
    // from the second review) are named after the table, one line each,
    // and the drill has rows of its own for the second review's two.
    let classes = json["attack_classes"].as_array().unwrap();
    assert_eq!(classes.len(), 12);
    let n = classes.len();
    let class_lines = &lines[lines.len() - 1 - n..lines.len() - 1];
    for (line, c) in class_lines.iter().zip(classes) {
        let title = c["title"].as_str().unwrap();
        assert!(
            line.starts_with(&format!("attack {} ({title})", c["class"])),
            "{line} vs {c}"
        );
        if c["class"].as_u64().unwrap() >= 11 {
            assert!(c["rows"].as_u64().unwrap() > 0, "no drill row for {c}");
        }
    }
    schema::check(&json);
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), json["probes"].as_u64().unwrap() as usize);
    // Every probe of the record is a row of the table (the header is the
    // third line, after the claim and the profile list).
    let table: Vec<&str> = lines[3..lines.len() - 1 - n].to_vec();
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
        // The default table fits 100 columns: verdict, from, to and the
        // start of the probe's text (all of it in `--wide` and the JSON).
        assert!(line.chars().count() <= 100, "{line}");
        assert!(
            line.starts_with(row["verdict"].as_str().unwrap()),
            "{line} vs {row}"
        );
        assert!(
            line.contains(row["from"].as_str().unwrap()),
            "{line} vs {row}"
        );
        let probe: String = row["probe"].as_str().unwrap().chars().take(20).collect();
        assert!(line.contains(&probe), "{line} vs {row}");
    }
    // The rows the isolation-for-life and second-attack-review issues
    // asked for (25: a removed profile, a deleted table under a live flow;
    // 26: its DHCP classes and the TCP/53 flood), each with its control.
    for prefix in [
        "removed profile (apply --force)",
        "deleted table under a live flow",
        "DHCP class 6: ",
        "DHCP class 7: ",
        "gateway class 5: ",
    ] {
        let hits: Vec<_> = rows
            .iter()
            .filter(|r| r["probe"].as_str().unwrap().starts_with(prefix))
            .collect();
        assert!(!hits.is_empty(), "no drill row `{prefix}…`");
        for r in hits {
            assert_eq!(r["expected"], "block", "{r}");
            assert_eq!(
                r["control"], "connected",
                "the attack lands without the rule: {r}"
            );
        }
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
