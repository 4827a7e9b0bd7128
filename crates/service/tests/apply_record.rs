//! An apply whose record cannot be written puts the previous ruleset back:
//! otherwise every later verify, refresh and start would judge the host
//! against a record that no longer describes it. The fault is real: the
//! state directory is made immutable (`chattr +i`), so the atomic write of
//! the record fails while the lock and the reads still work.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use corral_egress::host::HostDrift;
use corral_egress::netns::Netns;
use corral_sandbox_core::Config;
use corral_service::Target;
use corral_service::config::{LoadedConfig, Origin};
use corral_service::host::{ApplyError, HostService, Planned, applied, plan_config};

fn planned(mode: &str) -> Planned {
    let text = format!(
        "[[profile]]\nname = \"ar\"\nbridge = \"corral-ar\"\nsubnet = \"10.249.3.0/24\"\nmode = \"{mode}\"\n"
    );
    plan_config(LoadedConfig {
        config: Config::from_toml_str(&text, "apply_record").unwrap(),
        origin: Origin::Builtin,
    })
    .unwrap()
}

/// `chattr` on the state directory; cleared again on drop.
struct Immutable<'a>(&'a Path);

impl<'a> Immutable<'a> {
    fn set(dir: &'a Path) -> Self {
        let ok = Command::new("chattr").arg("+i").arg(dir).status().unwrap();
        assert!(ok.success(), "chattr +i {}", dir.display());
        Self(dir)
    }
}

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(self.0).status();
    }
}

fn nft_drift(host: &HostService, p: &Planned) -> Vec<HostDrift> {
    let p = host.complete(p).unwrap();
    host.verify(&p)
        .unwrap()
        .into_iter()
        .filter(|d| matches!(d, HostDrift::Nft(_)))
        .collect()
}

#[test]
fn an_apply_that_cannot_be_recorded_puts_the_previous_ruleset_back() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = Netns::new().unwrap();
    let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd().as_raw_fd());
    let state = tempfile::tempdir().unwrap();
    let host = HostService::new(Target::open(Some(&path)).unwrap(), state.path().to_owned());
    let (internet, none) = (planned("internet"), planned("none"));
    host.apply(&internet).unwrap();
    // Control: the second plan applies and is recorded while the record
    // can be written.
    host.apply(&none).unwrap();
    assert!(nft_drift(&host, &none).is_empty());
    assert!(
        !nft_drift(&host, &internet).is_empty(),
        "the plans must differ"
    );

    let err = {
        let _frozen = Immutable::set(state.path());
        host.apply(&internet).unwrap_err()
    };
    assert!(matches!(err, ApplyError::Record { .. }), "{err:?}");
    assert!(
        err.to_string().contains("previous ruleset was put back"),
        "{err}"
    );
    let drift = nft_drift(&host, &none);
    assert!(
        drift.is_empty(),
        "the recorded plan is not what is in force: {drift:#?}"
    );
    let recorded = applied(&host.store()).unwrap().unwrap();
    assert_eq!(recorded.config, none.config, "the record changed");
    let _ = host.teardown();
}
