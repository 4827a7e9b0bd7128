//! Every bad-configuration case the issue lists: the real binary names the
//! file, the line, the field and the fix, and exits 2.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::corral_in;

/// (file name, content, fragments the message must contain)
const CASES: &[(&str, &str, &[&str])] = &[
    (
        "long.toml",
        "[[profile]]\nname = \"dev\"\nbridge = \"corral-way-too-long\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\n",
        &[
            "long.toml:3",
            "profile \"dev\"",
            "bridge:",
            "limit is 15 bytes",
        ],
    ),
    (
        "charset.toml",
        "[[profile]]\nname = \"dev\"\nbridge = \"br/0\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\n",
        &["charset.toml:3", "bridge:"],
    ),
    (
        "dup.toml",
        "[[profile]]\nname = \"dev\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\n\n[[profile]]\nname = \"dev\"\nbridge = \"br-b\"\nsubnet = \"10.51.0.0/24\"\nmode = \"none\"\n",
        &["dup.toml:8", "name:", "used twice", "own name"],
    ),
    (
        "dupbridge.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\n\n[[profile]]\nname = \"b\"\nbridge = \"br-a\"\nsubnet = \"10.51.0.0/24\"\nmode = \"none\"\n",
        &["dupbridge.toml:9", "profile \"b\"", "bridge:"],
    ),
    (
        "overlap.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/16\"\nmode = \"none\"\n\n[[profile]]\nname = \"b\"\nbridge = \"br-b\"\nsubnet = \"10.50.3.0/24\"\nmode = \"none\"\n",
        &["overlap.toml:10", "subnet:", "overlaps", "separate subnet"],
    ),
    (
        "small.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/30\"\nmode = \"none\"\n",
        &["small.toml:4", "subnet:", "too small", "/29"],
    ),
    (
        "unknown.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\ncolour = \"blue\"\n",
        &["unknown.toml:6", "colour", "expected one of", "bridge"],
    ),
    (
        "empty.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"allowlist\"\nallow = []\n",
        &["empty.toml:", "allow:", "empty", "mode \"none\""],
    ),
    (
        "port.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"allowlist\"\nallow = [\"example.com:70000\"]\n",
        &["port.toml:6", "allow:", "1 to 65535"],
    ),
    (
        "range.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"allowlist\"\nallow = [\"example.com:90-80\"]\n",
        &["range.toml:6", "allow:", "backwards"],
    ),
    (
        "hostname.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"allowlist\"\nallow = [\"bad_host.example.com\"]\n",
        &[
            "hostname.toml:6",
            "allow:",
            "'_' is not allowed",
            "DNS name",
        ],
    ),
    ("syntax.toml", "x = \n", &["syntax.toml:1"]),
    (
        "extra.conf",
        "# legacy format\ndev corral-dev 10.60.0.0/24 internet extra\n",
        &["extra.conf:2", "extra column", "exactly 4 columns"],
    ),
];

fn write_case(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).unwrap();
}

#[test]
fn each_bad_config_names_file_line_field_and_fix_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content, fragments) in CASES {
        write_case(dir.path(), name, content);
        let run = corral_in(Some(dir.path()), &["config", "check", name]);
        assert_eq!(run.code, Some(2), "{name}: exit code\n{}", run.stderr);
        assert!(
            run.stdout.is_empty(),
            "{name}: stdout should be empty: {}",
            run.stdout
        );
        for f in *fragments {
            assert!(
                run.stderr.contains(f),
                "{name}: message lacks `{f}`:\n{}",
                run.stderr
            );
        }
        assert!(run.stderr.starts_with("error: "), "{name}: {}", run.stderr);
    }
}

#[test]
fn host_commands_refuse_a_bad_config_with_exit_2_before_touching_anything() {
    let dir = tempfile::tempdir().unwrap();
    let (name, content, fragments) = CASES[0];
    write_case(dir.path(), name, content);
    for verb in ["plan", "apply", "verify", "status", "refresh"] {
        let run = corral_in(Some(dir.path()), &["host", verb, "--config", name]);
        assert_eq!(run.code, Some(2), "host {verb}: {}", run.stderr);
        assert!(
            run.stderr.contains(fragments[0]),
            "host {verb}: {}",
            run.stderr
        );
    }
    let run = corral_in(Some(dir.path()), &["profiles", "--config", name]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let run = corral_in(Some(dir.path()), &["drill", "--config", name]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}

#[test]
fn every_problem_is_listed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    write_case(
        dir.path(),
        "many.toml",
        "[[profile]]\nname = \"a\"\nbridge = \"corral-way-too-long\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\n\n[[profile]]\nname = \"b\"\nbridge = \"br-b\"\nsubnet = \"10.51.0.0/30\"\nmode = \"none\"\n",
    );
    let run = corral_in(Some(dir.path()), &["config", "check", "many.toml"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("many.toml:3"), "{}", run.stderr);
    assert!(run.stderr.contains("many.toml:10"), "{}", run.stderr);
    assert!(run.stderr.contains("nothing was loaded"), "{}", run.stderr);
}

#[test]
fn missing_file_is_a_usage_error() {
    let run = common::corral(&["config", "check", "/nonexistent/corral.toml"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("/nonexistent/corral.toml"),
        "{}",
        run.stderr
    );
    let run = common::corral(&["host", "plan", "--config", "/nonexistent/corral.toml"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}

#[test]
fn bad_arguments_exit_2() {
    let run = common::corral(&["host", "frobnicate"]);
    assert_eq!(run.code, Some(2));
    let run = common::corral(&["matrix", "--host", "beos"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("linux"), "{}", run.stderr);
}

/// A name carrying terminal escapes and a line break must not forge an
/// "ok … valid" line (or move the cursor) on the operator's terminal.
#[test]
fn refused_values_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    // TOML's \u escapes put a real ESC, CR and line feed into the value.
    let forged = r#"x\u001b[1A\u001b[2K\rok corral.toml: valid, 1 profile (x)\nmore"#;
    write_case(
        dir.path(),
        "evil.toml",
        &format!(
            "[[profile]]\nname = \"{forged}\"\nbridge = \"br-a\"\nsubnet = \"10.50.0.0/24\"\nmode = \"none\"\n"
        ),
    );
    let run = corral_in(Some(dir.path()), &["config", "check", "evil.toml"]).expect_code(2);
    assert!(
        !run.stderr.contains('\u{1b}'),
        "raw ESC on stderr: {:?}",
        run.stderr
    );
    assert!(
        !run.stderr.contains('\r'),
        "raw CR on stderr: {:?}",
        run.stderr
    );
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("ok ")),
        "a forged line: {:?}",
        run.stderr
    );
    assert!(run.stderr.contains("\\u{1b}[1A"), "{:?}", run.stderr);
}
