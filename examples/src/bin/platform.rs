//! Print the platform matrix (which sandbox kinds run on which host OS, how
//! isolated they are, where egress is enforced) and what `select_provider`
//! says for every kind on THIS host, for profiled work.
//!
//! ```text
//! cargo run -p corral-examples --bin platform
//! cargo run -p corral-examples --bin platform -- examples/corral.toml
//! ```
//!
//! The host settings matter: a remote kind counts as enforced only when
//! the operator attests its executors (`host.attested_executors`), and a
//! provider-host filter (Tart) only when opted in to verification.

use std::process::ExitCode;

use anyhow::Context;
use corral_sandbox_core::platform::{Cell, entries};
use corral_sandbox_core::{Config, HostOs, SandboxKind, select_provider};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("platform: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let config = match std::env::args().nth(1) {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
            Config::from_toml_str(&text, &path).map_err(|e| anyhow::anyhow!("{e}"))?
        }
        None => Config::builtin_default(),
    };

    println!("{:<8} {:<17} cell", "host", "kind");
    for e in entries() {
        let cell = match e.cell {
            Cell::Supported(s) => format!(
                "supported: {} isolation, {}{}",
                s.isolation,
                s.classify(e.kind, &config.host),
                if s.caution { " (caution)" } else { "" }
            ),
            Cell::Refused(r) => format!("refused: {} (use {})", r.reason, r.use_instead),
        };
        println!("{:<8} {:<17} {cell}", e.host_os.as_str(), e.kind.as_str());
    }

    let os = std::env::consts::OS;
    let host_os = HostOs::from_target_os(os)
        .with_context(|| format!("corral does not know this host's OS `{os}`"))?;
    println!("\nprofiled work on this host ({}):", host_os.as_str());
    for kind in SandboxKind::ALL {
        match select_provider(host_os, kind, &config.host, true) {
            Ok(sel) => println!(
                "  {:<17} ok: {}{}",
                kind.as_str(),
                sel.classification,
                if sel.verification_required {
                    ", each sandbox must pass the canary first"
                } else {
                    ""
                }
            ),
            Err(e) => println!("  {:<17} no: {e}", kind.as_str()),
        }
    }
    Ok(())
}
