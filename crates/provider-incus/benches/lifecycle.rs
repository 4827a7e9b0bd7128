//! corral's create → start → exec → delete against the same sequence with
//! the `incus` CLI, in the same run, on the local daemon and test image.
//!
//! `cargo bench -p corral-provider-incus --bench lifecycle [-- N]`
//! (needs scripts/incus-setup.sh and scripts/incus-image.sh first).

use std::process::Command;
use std::time::{Duration, Instant};

use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{ExecRequest, SandboxProvider, SandboxSpec};

fn incus(args: &[&str]) -> Result<(), String> {
    let out = Command::new("incus")
        .args(args)
        .output()
        .map_err(|e| format!("incus {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "incus {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn cli_cycle(name: &str, project: &str) -> Result<(), String> {
    incus(&[
        "init",
        TEST_IMAGE_ALIAS,
        name,
        "--no-profiles",
        "-s",
        "default",
        "--project",
        project,
    ])?;
    incus(&["start", name, "--project", project])?;
    incus(&["exec", name, "--project", project, "--", "true"])?;
    incus(&["delete", "-f", name, "--project", project])
}

/// One corral cycle; returns the time of each phase
/// (create, start, exec, delete).
async fn corral_cycle(p: &IncusProvider, name: &str) -> Result<[Duration; 4], String> {
    let name = SandboxName::new(name).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let sb = p
        .create(&SandboxSpec::new(name, TEST_IMAGE_ALIAS))
        .await
        .map_err(|e| e.to_string())?;
    let created = t.elapsed();
    let t = Instant::now();
    sb.start().await.map_err(|e| e.to_string())?;
    let started = t.elapsed();
    let t = Instant::now();
    let out = sb
        .exec(&ExecRequest::new(["true"]))
        .await
        .map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!("exec exited {}", out.exit_code));
    }
    let execed = t.elapsed();
    let t = Instant::now();
    sb.delete().await.map_err(|e| e.to_string())?;
    Ok([created, started, execed, t.elapsed()])
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    let p = IncusProvider::connect(IncusConfig::local())
        .await
        .map_err(|e| e.to_string())?;
    let project = p.config().project.clone();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut phases: [Vec<Duration>; 4] = Default::default();
    // Interleaved, so drift in the daemon's state hits both alike.
    for i in 0..n {
        let name = format!("bench-corral-{}-{i}", std::process::id());
        let t = Instant::now();
        let parts = corral_cycle(&p, &name).await?;
        ours.push(t.elapsed());
        for (all, part) in phases.iter_mut().zip(parts) {
            all.push(part);
        }
        let name = format!("bench-cli-{}-{i}", std::process::id());
        let t = Instant::now();
        cli_cycle(&name, &project)?;
        theirs.push(t.elapsed());
    }
    let (m_ours, m_theirs) = (median(ours.clone()), median(theirs.clone()));
    let total = |v: &[Duration]| v.iter().sum::<Duration>();
    println!("incus lifecycle (create -> start -> exec true -> delete), {n} iterations each");
    println!(
        "corral (REST): median {:>7.1} ms, total {:>8.1} ms",
        m_ours.as_secs_f64() * 1e3,
        total(&ours).as_secs_f64() * 1e3
    );
    println!(
        "incus CLI:     median {:>7.1} ms, total {:>8.1} ms",
        m_theirs.as_secs_f64() * 1e3,
        total(&theirs).as_secs_f64() * 1e3
    );
    let names = ["create", "start", "exec", "delete"];
    let parts: Vec<String> = names
        .iter()
        .zip(phases)
        .map(|(n, v)| format!("{n} {:.1} ms", median(v).as_secs_f64() * 1e3))
        .collect();
    println!("corral phases (median): {}", parts.join(", "));
    println!(
        "ratio corral/cli (median): {:.2}",
        m_ours.as_secs_f64() / m_theirs.as_secs_f64()
    );
    Ok(())
}
