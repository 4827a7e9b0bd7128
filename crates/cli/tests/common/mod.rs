//! Shared helpers for the end-to-end tests: run the real `corral` binary and
//! capture what it printed and how it exited.

#![allow(dead_code)]

pub mod netns;
pub mod sandboxes;
pub mod schema;

use std::path::Path;
use std::process::{Command, Output};

/// The `corral` binary cargo built for these tests.
pub const CORRAL: &str = env!("CARGO_BIN_EXE_corral");

/// What one run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Panic with everything printed unless the exit code is `code`.
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Parse stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\n--- stderr\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Run `corral args…` (without colour, without RUST_LOG).
pub fn corral(args: &[&str]) -> Run {
    corral_in(None, args)
}

/// Run `corral args…` in directory `dir`.
pub fn corral_in(dir: Option<&Path>, args: &[&str]) -> Run {
    let mut cmd = Command::new(CORRAL);
    cmd.args(args).env_remove("RUST_LOG").env("NO_COLOR", "1");
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {CORRAL}: {e}"))
        .into()
}

/// Assert that a JSON object has every one of `fields`.
pub fn assert_fields(value: &serde_json::Value, fields: &[&str], what: &str) {
    let obj = value
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object: {value}"));
    for f in fields {
        assert!(
            obj.contains_key(*f),
            "{what} lacks documented field `{f}`: {value}"
        );
    }
}
