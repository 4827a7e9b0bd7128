//! corral's own resolver and DHCP server (`dns = "corral"`) on every
//! bridge whose record the apply wrote
//! (`corral_gateway::resolver::record_all`), hosted in the supervisor's
//! process: corrald, or `corral host watch` on a host without it. Each
//! rescan of the gateway supervisor brings the hosted set in line with the
//! records: a new record is served, a rewritten one replaces its resolver
//! (the old one refuses from the moment its record changed), a removed one
//! stops it, and one whose sockets failed (its bridge recreated) is
//! started again. They serve together or not at all: a bridge whose DHCP
//! server cannot start has no resolver either, so the start gate (which
//! asks the resolver, or on a `none` profile the gateway's socket)
//! refuses its sandboxes.

use std::collections::HashMap;
use std::path::Path;

use corral_egress::netns::Netns;
use corral_gateway::HostedGateway;
use corral_gateway::resolver::{Bounds, recorded};
use corral_sandbox_core::BridgeName;

/// The resolvers this process hosts, by bridge, and the last start
/// failure of each bridge that has one (logged once per distinct error).
#[derive(Debug, Default)]
pub(crate) struct Resolvers {
    hosted: HashMap<BridgeName, HostedGateway>,
    failed: HashMap<BridgeName, String>,
}

impl Resolvers {
    /// Brings the hosted resolvers in line with the records under
    /// `state_dir`, inside `netns`. Blocking (binds sockets, joins the
    /// threads of resolvers it stops).
    pub(crate) fn sync(&mut self, state_dir: &Path, netns: &Netns) {
        let records = recorded(state_dir);
        self.hosted.retain(|bridge, h| {
            let keep = h.is_serving()
                && h.is_current()
                && records.iter().any(|r| &r.bridge == bridge);
            if !keep {
                tracing::info!(bridge = %bridge, "corral's resolver and DHCP server: stopping (the record changed or went, or a socket failed)");
            }
            keep
        });
        self.failed
            .retain(|bridge, _| records.iter().any(|r| &r.bridge == bridge));
        for r in &records {
            if self.hosted.contains_key(&r.bridge) {
                continue;
            }
            match HostedGateway::start(state_dir, netns, r, Bounds::default()) {
                Ok(h) => {
                    tracing::info!(bridge = %r.bridge, at = ?h.resolver().map(|r| r.at()), "corral's resolver and DHCP server: serving");
                    self.failed.remove(&r.bridge);
                    self.hosted.insert(r.bridge.clone(), h);
                }
                Err(e) => {
                    if self.failed.get(&r.bridge) != Some(&e) {
                        tracing::error!(bridge = %r.bridge, error = %e, "corral's resolver and DHCP server: cannot serve; its sandboxes get no lease and no answer, and the start gate refuses them");
                    }
                    self.failed.insert(r.bridge.clone(), e);
                }
            }
        }
    }
}
