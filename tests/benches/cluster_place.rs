//! Place → ready on a two-member Incus cluster against one host, in the
//! same run. The baseline is the host's own Incus daemon behind the
//! built-in lab (corral's built-in profiles applied for real in the host
//! namespace); the cluster is `corral_tests::cluster` (two `incusd` in
//! their own network namespaces, the same configuration applied in each).
//! Each iteration creates one `allowlist` sandbox through the service —
//! start gate, port binding, create, start, DHCP lease from the profile's
//! gateway, exec answering — on the host, on `m1` by `m1`'s corral and on
//! `m2` by `m2`'s corral (placed with `target`), interleaved, and deletes
//! it again.
//!
//! `cargo bench -p corral-tests --bench cluster_place [-- N]` (root; Incus
//! and the test image from scripts/incus-setup.sh and scripts/incus-image.sh).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_provider_incus::{Endpoint, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::StopOptions;
use corral_service::cluster::Controller;
use corral_service::sandboxes::NewSandbox;
use corral_service::{Backend, CreateOptions, SandboxService, Settings, Store, WallClock};
use corral_tests::builtin_lab::BuiltinLab;
use corral_tests::cluster::{ClusterLab, LabAttester, MemberCorral};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Place → ready for one sandbox, then delete it (not timed).
async fn place(service: &SandboxService, name: &str, target: Option<&str>) -> Duration {
    let mut req = NewSandbox::new(name, TEST_IMAGE_ALIAS).on("allowlist");
    req.target = target.map(Into::into);
    let t = Instant::now();
    let out = service
        .create(&req, CreateOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let took = t.elapsed();
    assert_eq!(out.info.location.as_deref(), target, "{name}");
    let b = service.open(name).await.unwrap();
    let _ = b
        .stop(StopOptions {
            force: true,
            timeout: None,
        })
        .await;
    service
        .delete(name)
        .await
        .unwrap_or_else(|e| panic!("delete {name}: {e}"));
    took
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let host_lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    host_lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let formed = Instant::now();
    let cluster = ClusterLab::new().unwrap_or_else(|e| panic!("{e}"));
    let formed = formed.elapsed();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (m1, m2) = (cluster.member("m1"), cluster.member("m2"));
    // Connecting converges corral's project on the cluster; the image goes in after.
    rt.block_on(IncusProvider::connect(IncusConfig {
        endpoint: Endpoint::Unix(m1.socket()),
        ..IncusConfig::local()
    }))
    .unwrap();
    cluster
        .import_image(TEST_IMAGE_ALIAS, "corral", "corral")
        .unwrap_or_else(|e| panic!("{e}"));
    // The same configuration on every member as on the host.
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<MemberCorral> = [m1, m2]
        .iter()
        .map(|m| {
            MemberCorral::apply(&host_lab.config_path(), m, dir.path().join(&m.name))
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();

    let loaded = corral_service::config::load_file(
        &host_lab.config_path(),
        corral_sandbox_core::config::ConfigFormat::Toml,
    )
    .unwrap();
    // Each member's standings, written once by a controller tick (an
    // hour's interval: the rotation's read is part of placement, its
    // refresh is not).
    let attester = Arc::new(LabAttester::new(
        &[(m1, &members[0]), (m2, &members[1])],
        loaded.config.clone(),
    ));
    for (i, c) in members.iter().enumerate() {
        let list = rt
            .block_on(IncusProvider::connect(IncusConfig {
                endpoint: Endpoint::Unix(cluster.members[i].socket()),
                ..IncusConfig::local()
            }))
            .unwrap();
        let mut controller = Controller::new(
            Duration::from_secs(3600),
            Arc::new(list),
            Arc::clone(&attester) as _,
            Arc::new(Store::open(c.state_dir()).unwrap()),
            Arc::new(WallClock),
            c.state_dir().to_owned(),
        );
        rt.block_on(controller.tick(std::time::SystemTime::now()))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let settings = Arc::new(Settings::new(loaded, None, Some(&host_lab.state_dir())));
    let host = SandboxService::new(
        Arc::clone(&settings),
        Arc::new(
            Backend::select(
                "linux",
                SandboxKind::Incus,
                &settings.config.host,
                corral_test_support::gate::INCUS_SOCKET.into(),
            )
            .unwrap(),
        ),
    )
    .without_canary("the bench measures placement, not the canary");
    let on_m1 = members[0].service(m1).unwrap();
    let on_m2 = members[1].service(m2).unwrap();
    let pid = std::process::id();
    let (mut h, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        // One unmeasured round each: first-use costs (image unpack on a
        // member) are not placement.
        for i in 0..=n {
            let th = place(&host, &format!("b-cl-h{i}-{pid}"), None).await;
            let t1 = place(&on_m1, &format!("b-cl-a{i}-{pid}"), Some("m1")).await;
            let t2 = place(&on_m2, &format!("b-cl-b{i}-{pid}"), Some("m2")).await;
            if i > 0 {
                h.push(th);
                a.push(t1);
                b.push(t2);
            }
        }
    });
    let base = ms(median(h));
    println!(
        "place → ready, `allowlist` sandbox through the service, {n} per row, median (cluster of 2 formed in {:.0} ms)",
        ms(formed)
    );
    println!("| where | place → ready (ms) | ratio vs one host |");
    println!("|---|---:|---:|");
    println!("| one host (host daemon) | {base:.0} | 1.00 |");
    for (label, v) in [
        ("cluster, member m1 (`--target m1`)", a),
        ("cluster, member m2 (`--target m2`)", b),
    ] {
        let t = ms(median(v));
        println!("| {label} | {t:.0} | {:.2} |", t / base);
    }
    drop(members);
    drop(cluster);
    drop(host_lab);
}
