//! corral's own gateway on one bridge (`dns = "corral"`): its resolver,
//! its DHCP server and (on a profile with a /64) its router
//! advertisements, started from the apply's records and stopped
//! together. Whoever hosts corral's gateway (corrald's supervisor, `corral
//! host watch`, the drill's lab) hosts this, so no host serves one without
//! the other: a bridge whose DHCP server cannot start has no resolver
//! either, and the start gate (which asks the resolver) refuses its
//! sandboxes.

use std::path::Path;

use corral_egress::netns::Netns;

use corral_egress::plan::bindings::SLAAC_PREFIX_LEN;

use crate::GatewayPaths;
use crate::advertiser::HostedAdverts;
use crate::dhcp::{HostedDhcp, Network};
use crate::resolver::{Bounds, Hosted, Recorded};

/// One bridge's resolver, DHCP server and router advertisements;
/// dropping it stops them all.
#[derive(Debug)]
pub struct HostedGateway {
    resolver: Hosted,
    dhcp: HostedDhcp,
    adverts: Option<HostedAdverts>,
}

impl HostedGateway {
    /// Starts both for the record `r` of a bridge under `state_dir`,
    /// inside `netns`: the resolver from the record, the DHCP server for
    /// the record's profile by the reservations recorded beside it.
    pub fn start(
        state_dir: &Path,
        netns: &Netns,
        r: &Recorded,
        bounds: Bounds,
    ) -> Result<Self, String> {
        let profile = match &r.spec {
            Ok(spec) => &spec.profile,
            Err(e) => return Err(e.clone()),
        };
        let resolver = Hosted::from_record(netns, r, bounds)?;
        let dir = GatewayPaths::new(state_dir, &r.bridge).dir().to_owned();
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
        Ok(Self {
            resolver,
            dhcp,
            adverts,
        })
    }

    /// The resolver.
    pub fn resolver(&self) -> &Hosted {
        &self.resolver
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
        self.resolver.is_serving()
            && self.dhcp.is_serving()
            && self.adverts.as_ref().is_none_or(HostedAdverts::is_serving)
    }
}
