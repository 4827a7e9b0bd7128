//! Canary wall time per sandbox: real Incus containers on each built-in
//! profile (applied for real in the host namespace by the built-in lab,
//! every block a reject). Each iteration creates a fresh container (no
//! hook), times its first canary — the one a create runs before hand-out —
//! and, as the baseline measured in the same run, one exec round trip
//! (`true`) in the same container, then deletes it. A second table runs
//! the canary back to back on one sandbox (as a re-verification would,
//! faster than the kernel's ICMP rate limit refills).
//!
//! `cargo bench -p corral-tests --bench canary [-- N]` (root; Incus and
//! the test image from scripts/incus-setup.sh and scripts/incus-image.sh).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::{ExecRequest, Sandbox, StopOptions};
use corral_service::sandboxes::NewSandbox;
use corral_service::{
    Backend, CreateOptions, Report, SandboxService, Settings, Store, Verifier, WallClock,
};
use corral_tests::builtin_lab::BuiltinLab;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The slowest check of a run and its time.
fn slowest(r: &Report) -> String {
    r.event
        .checks
        .iter()
        .max_by_key(|c| c.elapsed_ms)
        .map_or_else(String::new, |c| {
            format!("{} {} ms", c.kind.as_str(), c.elapsed_ms)
        })
}

async fn make(service: &SandboxService, name: &str, profile: &str) -> Box<dyn Sandbox> {
    service
        .create(
            &NewSandbox::new(name, TEST_IMAGE_ALIAS).on(profile),
            CreateOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    service.open(name).await.unwrap()
}

async fn remove(b: Box<dyn Sandbox>) {
    let _ = b
        .stop(StopOptions {
            force: true,
            timeout: None,
        })
        .await;
    let _ = b.delete().await;
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let loaded = corral_service::config::load_file(
        &lab.config_path(),
        corral_sandbox_core::config::ConfigFormat::Toml,
    )
    .unwrap();
    let settings = Arc::new(Settings::new(loaded, None, Some(&lab.state_dir())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pid = std::process::id();
    rt.block_on(async {
        let backend = Arc::new(
            Backend::select(
                "linux",
                SandboxKind::Incus,
                &settings.config.host,
                corral_test_support::gate::INCUS_SOCKET.into(),
            )
            .unwrap(),
        );
        let store = Arc::new(Store::open(&settings.state_dir).unwrap());
        let verifier = Verifier::new(Arc::clone(&settings), store, Arc::new(WallClock))
            .with_backend(Arc::clone(&backend));
        // No hook: the benchmark runs the canary itself.
        let service = SandboxService::new(Arc::clone(&settings), backend)
            .without_canary("the benchmark runs the canary itself");
        println!("first canary of a fresh sandbox, {n} sandboxes per profile, median");
        println!(
            "| profile | checks | canary (ms) | exec round trip (ms) | ratio canary/exec | slowest check (last run) |"
        );
        println!("|---|---:|---:|---:|---:|---|");
        for profile in ["isolated", "internet", "allowlist"] {
            let (mut canary, mut exec) = (Vec::new(), Vec::new());
            let mut last = None;
            for i in 0..n {
                let b = make(&service, &format!("b-canary-{i}-{pid}"), profile).await;
                let t = Instant::now();
                let report = verifier.verify(b.as_ref()).await.unwrap();
                canary.push(t.elapsed());
                assert!(report.passed, "{:#?}", report.event);
                let t = Instant::now();
                assert!(b.exec(&ExecRequest::new(["true"])).await.unwrap().success());
                exec.push(t.elapsed());
                last = Some(report);
                remove(b).await;
            }
            let last = last.unwrap();
            let (c, e) = (median(canary), median(exec));
            println!(
                "| {profile} | {} | {:.0} | {:.0} | {:.1} | {} |",
                last.event.checks.len(),
                ms(c),
                ms(e),
                ms(c) / ms(e),
                slowest(&last)
            );
        }

        println!();
        println!("re-verification: {n} runs back to back on one sandbox, median");
        println!("| profile | checks | canary (ms) | slowest check (last run) |");
        println!("|---|---:|---:|---|");
        let a = make(&service, &format!("b-canary-a-{pid}"), "allowlist").await;
        let sib = make(&service, &format!("b-canary-s-{pid}"), "allowlist").await;
        for (label, b) in [("allowlist, with a sibling", &a)] {
            let mut canary = Vec::new();
            let mut last = None;
            for _ in 0..n {
                let t = Instant::now();
                let report = verifier.verify(b.as_ref()).await.unwrap();
                canary.push(t.elapsed());
                assert!(report.passed, "{:#?}", report.event);
                last = Some(report);
            }
            let last = last.unwrap();
            println!(
                "| {label} | {} | {:.0} | {} |",
                last.event.checks.len(),
                ms(median(canary)),
                slowest(&last)
            );
        }
        remove(a).await;
        remove(sib).await;
    });
    drop(lab);
}
