//! corral's own gateway on one bridge (`dns = "corral"`): its DHCP
//! server, (on a profile with a /64) its router advertisements and (on
//! every mode but `none`) its resolver, started from the apply's records
//! and stopped together. Whoever hosts corral's gateway (corrald's
//! supervisor, `corral host watch`, the drill's lab) hosts this, so no
//! host serves one without the others: a bridge whose DHCP server cannot
//! start has no resolver either, and the start gate (which asks the
//! resolver, or on `none` the gateway's socket) refuses its sandboxes.

use std::path::{Path, PathBuf};

use corral_egress::netns::Netns;

use corral_egress::plan::bindings::SLAAC_PREFIX_LEN;

use crate::GatewayPaths;
use crate::advertiser::HostedAdverts;
use crate::dhcp::{HostedDhcp, Network};
use crate::hosted_mark::HostedMark;
use crate::resolver::{Bounds, Hosted, RecordId, Recorded};

/// One bridge's DHCP server, router advertisements and resolver; dropping
/// it stops them all.
#[derive(Debug)]
pub struct HostedGateway {
    resolver: Option<Hosted>,
    dhcp: HostedDhcp,
    adverts: Option<HostedAdverts>,
    record: (PathBuf, RecordId),
    // Last: the bridge reads as hosted until everything above has stopped.
    _mark: HostedMark,
}

impl HostedGateway {
    /// Starts them for the record `r` of a bridge under `state_dir`,
    /// inside `netns`: the resolver from the record (unless the profile is
    /// `none`), the DHCP server for the record's profile by the
    /// reservations recorded beside it.
    pub fn start(
        state_dir: &Path,
        netns: &Netns,
        r: &Recorded,
        bounds: Bounds,
    ) -> Result<Self, String> {
        let spec = match &r.spec {
            Ok(spec) => spec,
            Err(e) => return Err(e.clone()),
        };
        let profile = &spec.profile;
        let resolver = if spec.serves_dns() {
            Some(Hosted::from_record(netns, r, bounds)?)
        } else {
            None
        };
        let paths = GatewayPaths::new(state_dir, &r.bridge);
        let dir = paths.dir().to_owned();
        let network = Network::of_profile(profile);
        let dhcp = HostedDhcp::serve_recorded(netns, network, r.bridge.as_str(), &dir)
            .map_err(|e| e.to_string())?;
        let slaac = profile
            .subnet_v6
            .map(|n| n.trunc())
            .filter(|n| n.prefix_len() == SLAAC_PREFIX_LEN);
        let adverts = match slaac {
            Some(prefix) => {
                let dns = profile.gateway_v6().filter(|_| crate::serves_dns(profile));
                Some(
                    HostedAdverts::start(netns, prefix, dns, r.bridge.as_str(), &dir)
                        .map_err(|e| e.to_string())?,
                )
            }
            None => None,
        };
        let mark = HostedMark::claim(&paths.hosted_socket()).map_err(|e| e.to_string())?;
        Ok(Self {
            resolver,
            dhcp,
            adverts,
            record: (r.path.clone(), r.id),
            _mark: mark,
        })
    }

    /// The resolver (every mode but `none`).
    pub fn resolver(&self) -> Option<&Hosted> {
        self.resolver.as_ref()
    }

    /// The DHCP server.
    pub fn dhcp(&self) -> &HostedDhcp {
        &self.dhcp
    }

    /// The router advertisements (a profile with a /64 only).
    pub fn adverts(&self) -> Option<&HostedAdverts> {
        self.adverts.as_ref()
    }

    /// Whether all of them still serve (a socket error ends any).
    pub fn is_serving(&self) -> bool {
        self.resolver.as_ref().is_none_or(Hosted::is_serving)
            && self.dhcp.is_serving()
            && self.adverts.as_ref().is_none_or(HostedAdverts::is_serving)
    }

    /// Whether the record it was started from is still the one on disk
    /// (rewritten or removed: it serves an old policy and is to be
    /// replaced).
    pub fn is_current(&self) -> bool {
        RecordId::of(&self.record.0) == Some(self.record.1)
    }
}
