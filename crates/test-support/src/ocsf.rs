//! The OCSF schema check: scripts/ocsf-validate.py, run in the Python
//! environment scripts/ocsf-venv.sh makes (the OCSF schema as released,
//! and a JSON Schema validator). A test asks [`checker`] (gated like every
//! other need: fails under CI when the environment is missing) and hands
//! it OCSF events, one JSON object per line.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::gate;

/// A usable checker.
#[derive(Debug, Clone)]
pub struct Checker {
    python: PathBuf,
    script: PathBuf,
}

/// What the checker said about a batch of events.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Every event valid (and at least one read).
    pub valid: bool,
    /// Its output: one line per invalid event, then a summary.
    pub report: String,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The checker, when scripts/ocsf-venv.sh has made its environment.
pub fn checker() -> Option<Checker> {
    let python = repo().join("target/ocsf-venv/bin/python");
    let script = repo().join("scripts/ocsf-validate.py");
    let ok = Command::new(&python)
        .args(["-c", "import jsonschema, ocsf_json_schema"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        gate::skip(format!(
            "needs the OCSF schema checker ({} with jsonschema and ocsf-json-schema): run scripts/ocsf-venv.sh",
            python.display()
        ));
        return None;
    }
    Some(Checker { python, script })
}

impl Checker {
    /// Checks `lines` (OCSF events, one per line).
    pub fn check(&self, lines: &str) -> std::io::Result<Verdict> {
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(lines.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let mut report = String::from_utf8_lossy(&out.stdout).into_owned();
        report.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(Verdict {
            valid: out.status.success(),
            report,
        })
    }
}
