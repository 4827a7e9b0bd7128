//! Place profiled work with the trust order and the verification gate, as
//! an orchestrator would: rank the configured kinds, put an opted-in
//! provider-host filter (Tart) through its canary, demote it when the
//! canary leaks, re-place the work, and let it back after the cool-down.
//!
//! ```text
//! cargo run -p corral-examples --bin placement                    # examples/corral.toml
//! cargo run -p corral-examples --bin placement -- FILE [--host macos|linux|windows]
//! ```
//!
//! Nothing runs: the canary results are what a prober inside the sandbox
//! would report (first a leaking filter, then a working one), and time is
//! a manual clock. The gate never reads a clock or probes by itself; the
//! caller passes both in, which is what makes this deterministic.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use corral_sandbox_core::placement::{PlacementRequest, place, replace_after_failure};
use corral_sandbox_core::verify::{
    self, CanaryPlan, CheckResult, Clock, Expectation, FilterHealth, Gate, ManualClock, Observed,
    Timestamp,
};
use corral_sandbox_core::{Config, HostOs, SandboxKind, SandboxName};

/// The kinds this operator configured, in order of preference.
const CANDIDATES: [SandboxKind; 3] = [
    SandboxKind::Tart,
    SandboxKind::IncusRemote,
    SandboxKind::Multipass,
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("placement: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// What a prober would report for `plan`; with `leak`, the canary connects.
fn simulated_results(plan: &CanaryPlan, leak: bool) -> Vec<CheckResult> {
    plan.checks()
        .iter()
        .map(|c| {
            let observed = match c.expect {
                Expectation::Connects => Observed::Connected,
                Expectation::Fails if leak => Observed::Connected,
                Expectation::Fails => Observed::Refused,
                Expectation::DoesNotResolve => Observed::NotResolved,
            };
            CheckResult {
                kind: c.kind,
                observed,
                elapsed: Duration::from_millis(40),
                output: String::new(),
                control: c.control.as_ref().map(|_| verify::ControlResult {
                    observed: Observed::Connected,
                    elapsed: Duration::from_millis(10),
                }),
            }
        })
        .collect()
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let default_file = concat!(env!("CARGO_MANIFEST_DIR"), "/corral.toml");
    let file = args
        .iter()
        .take_while(|a| *a != "--host")
        .next()
        .map_or(default_file, String::as_str);
    let host_os = match args.iter().position(|a| a == "--host") {
        Some(i) => {
            let os = args.get(i + 1).context("--host needs a value")?;
            HostOs::from_target_os(os).with_context(|| format!("unknown host OS `{os}`"))?
        }
        None => HostOs::Macos,
    };
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
    let config = Config::from_toml_str(&text, file).map_err(|e| anyhow::anyhow!("{e}"))?;
    let profile = config
        .phases
        .work
        .as_ref()
        .and_then(|p| config.profiles.get(p.as_str()))
        .context("the configuration names no profile for the `work` phase")?;

    let clock = ManualClock::new(Timestamp(0));
    let mut gate = Gate::new(&config.host.verification);
    let request = |gate: &Gate, now| {
        place(&PlacementRequest {
            host_os,
            candidates: &CANDIDATES,
            host: &config.host,
            gate,
            now,
            profiled: true,
            exclude: &[],
        })
    };

    println!(
        "work on profile `{}` from {}, host {}",
        profile.name,
        file,
        host_os.as_str()
    );
    let placement = request(&gate, clock.now())?;
    print_placement(&placement);

    // Suppose the operator's first choice (Tart) runs the work: its sandbox
    // must pass the canary before any work is handed to it.
    let Some(tart) = placement
        .ranked
        .iter()
        .find(|c| c.kind == SandboxKind::Tart && c.needs_canary)
    else {
        println!("tart needs no canary here; nothing more to show");
        return Ok(());
    };
    let host_lan: SocketAddr = "192.168.1.10:22".parse()?;
    let vantage = verify::Vantage {
        host_lan: Some(host_lan),
        ..verify::Vantage::default()
    };
    let canary = verify::plan(
        profile,
        &config.host.verification,
        &vantage,
        verify::Requirement::Strict,
    )?;
    println!("\ncanary for a new {} sandbox:", tart.kind);
    for c in canary.checks() {
        println!(
            "  {:<32} {:<28} expect {:?}",
            c.kind.to_string(),
            c.target.to_string(),
            c.expect
        );
    }

    let sandbox = SandboxName::new("agent-1")?;
    let judged = gate.judge(
        &sandbox,
        SandboxKind::Tart,
        &canary,
        &simulated_results(&canary, true),
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    println!(
        "\nfirst sandbox: {:?}: {}",
        judged.event.outcome, judged.event.message
    );
    let again = replace_after_failure(
        &PlacementRequest {
            host_os,
            candidates: &CANDIDATES,
            host: &config.host,
            gate: &gate,
            now: clock.now(),
            profiled: true,
            exclude: &[],
        },
        SandboxKind::Tart,
    )?;
    println!("this work, re-placed:");
    print_placement(&again);
    println!("new work while tart is demoted:");
    print_placement(&request(&gate, clock.now())?);

    clock.advance(gate.options().cool_down + Duration::from_secs(1));
    println!(
        "\nafter the cool-down tart is {:?}",
        gate.status(SandboxKind::Tart, clock.now())
    );
    let judged = gate.judge(
        &sandbox,
        SandboxKind::Tart,
        &canary,
        &simulated_results(&canary, false),
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    println!(
        "second sandbox: {:?}: {}",
        judged.event.outcome, judged.event.message
    );
    if let Some(verified) = judged.verified {
        clock.advance(gate.options().reverify_interval);
        println!(
            "re-verification due after {:?}: {}",
            gate.options().reverify_interval,
            gate.reverify_due(&verified, clock.now())
        );
    }
    Ok(())
}

fn print_placement(p: &corral_sandbox_core::placement::Placement) {
    for c in &p.ranked {
        println!(
            "  candidate {:<14} trust: {}{}",
            c.kind.as_str(),
            c.trust,
            if c.needs_canary {
                " (canary first)"
            } else {
                ""
            }
        );
    }
    for s in &p.skipped {
        println!("  skipped   {s}");
    }
}
