//! corral's own gateway on one bridge (`dns = "corral"`): its resolver
//! and its DHCP server, started from the apply's records and stopped
//! together. Whoever hosts corral's gateway (corrald's supervisor, `corral
//! host watch`, the drill's lab) hosts this, so no host serves one without
//! the other: a bridge whose DHCP server cannot start has no resolver
//! either, and the start gate (which asks the resolver) refuses its
//! sandboxes.

use std::path::Path;

use corral_egress::netns::Netns;

use crate::GatewayPaths;
use crate::dhcp::{HostedDhcp, Network};
use crate::resolver::{Bounds, Hosted, Recorded};

/// One bridge's resolver and DHCP server; dropping it stops both.
#[derive(Debug)]
pub struct HostedGateway {
    resolver: Hosted,
    dhcp: HostedDhcp,
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
        let network = match &r.spec {
            Ok(spec) => Network::of_profile(&spec.profile),
            Err(e) => return Err(e.clone()),
        };
        let resolver = Hosted::from_record(netns, r, bounds)?;
        let dir = GatewayPaths::new(state_dir, &r.bridge).dir().to_owned();
        let dhcp = HostedDhcp::serve_recorded(netns, network, r.bridge.as_str(), &dir)
            .map_err(|e| e.to_string())?;
        Ok(Self { resolver, dhcp })
    }

    /// The resolver.
    pub fn resolver(&self) -> &Hosted {
        &self.resolver
    }

    /// The DHCP server.
    pub fn dhcp(&self) -> &HostedDhcp {
        &self.dhcp
    }

    /// Whether both still serve (a socket error ends either).
    pub fn is_serving(&self) -> bool {
        self.resolver.is_serving() && self.dhcp.is_serving()
    }
}
