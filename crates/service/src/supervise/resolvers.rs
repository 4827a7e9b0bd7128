//! corral's own resolver (`dns = "corral"`) on every bridge whose record
//! the apply wrote (`corral_gateway::resolver::record_all`), hosted in the
//! supervisor's process: corrald, or `corral host watch` on a host without
//! it. Each rescan of the gateway supervisor brings the hosted set in line
//! with the records: a new record is served, a rewritten one replaces its
//! resolver (the old one refuses from the moment its record changed), a
//! removed one stops it, and one whose sockets failed (its bridge
//! recreated) is started again.

use std::collections::HashMap;
use std::path::Path;

use corral_egress::netns::Netns;
use corral_gateway::resolver::{Bounds, Hosted, recorded};
use corral_sandbox_core::BridgeName;

/// The resolvers this process hosts, by bridge, and the last start
/// failure of each bridge that has one (logged once per distinct error).
#[derive(Debug, Default)]
pub(crate) struct Resolvers {
    hosted: HashMap<BridgeName, Hosted>,
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
                && h.resolver().is_current()
                && records.iter().any(|r| &r.bridge == bridge);
            if !keep {
                tracing::info!(bridge = %bridge, "corral's resolver: stopping (its record changed or went, or its sockets failed)");
            }
            keep
        });
        self.failed
            .retain(|bridge, _| records.iter().any(|r| &r.bridge == bridge));
        for r in &records {
            if self.hosted.contains_key(&r.bridge) {
                continue;
            }
            match Hosted::from_record(netns, r, Bounds::default()) {
                Ok(h) => {
                    tracing::info!(bridge = %r.bridge, at = ?h.at(), "corral's resolver: serving");
                    self.failed.remove(&r.bridge);
                    self.hosted.insert(r.bridge.clone(), h);
                }
                Err(e) => {
                    if self.failed.get(&r.bridge) != Some(&e) {
                        tracing::error!(bridge = %r.bridge, error = %e, "corral's resolver: cannot serve; its sandboxes' lookups go unanswered and the start gate refuses them");
                    }
                    self.failed.insert(r.bridge.clone(), e);
                }
            }
        }
    }
}
