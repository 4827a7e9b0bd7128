//! Profile bridges: create (and stamp) or adopt, address, up, and delete
//! only what corral created.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{LinkError, LinkState, Links, errno};
use crate::plan::BridgePlan;
pub use crate::plan::fail_closed::STAMP_GROUP;

/// The `IFLA_IFALIAS` corral writes on bridges it creates. Teardown deletes
/// a bridge only when it carries exactly this stamp, so a bridge corral
/// adopted (one that existed before) is never deleted.
pub const STAMP: &str = "corral:managed:v1";

/// A bridge's own br_netfilter switches (`nf_call_iptables`, ...): when
/// set, the bridge hands its frames to the IP, IPv6 or ARP hooks whatever
/// the host-wide `net.bridge.bridge-nf-call-*` sysctls say (they only have
/// an effect while the br_netfilter module is loaded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeNetfilter {
    /// IPv4 frames pass the `ip`/`inet` hooks.
    pub iptables: bool,
    /// IPv6 frames pass the `ip6`/`inet` hooks.
    pub ip6tables: bool,
    /// ARP frames pass the `arp` hooks.
    pub arptables: bool,
}

/// What corral sets on its bridges: bridged IPv4 and IPv6 also meet the
/// inet rules (a second layer behind the bridge table; corral relies on
/// nothing else from br_netfilter), ARP is left to the bridge table.
pub const CORRAL_BRIDGE_NETFILTER: BridgeNetfilter = BridgeNetfilter {
    iptables: true,
    ip6tables: true,
    arptables: false,
};

impl BridgeNetfilter {
    pub(super) fn from_info(opts: &[netlink_packet_route::link::InfoBridge]) -> Self {
        use netlink_packet_route::link::InfoBridge;
        let mut nf = BridgeNetfilter {
            iptables: false,
            ip6tables: false,
            arptables: false,
        };
        for o in opts {
            match o {
                InfoBridge::NfCallIpTables(v) => nf.iptables = *v,
                InfoBridge::NfCallIp6Tables(v) => nf.ip6tables = *v,
                InfoBridge::NfCallArpTables(v) => nf.arptables = *v,
                _ => {}
            }
        }
        nf
    }
}

/// What [`Links::ensure_bridge`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BridgeOutcome {
    /// corral created the bridge and stamped it.
    Created,
    /// The bridge already carried corral's stamp (an earlier apply).
    Managed,
    /// A bridge corral did not create; it is used but never deleted.
    Adopted,
}

impl Links {
    /// Makes the bridge of `plan` exist with its gateway addresses, and up.
    ///
    /// A missing bridge is created and stamped; an existing bridge is
    /// adopted as is (its other addresses and ports are left alone).
    pub async fn ensure_bridge(&self, plan: &BridgePlan) -> Result<BridgeOutcome, LinkError> {
        let name = plan.name.as_str();
        let outcome = match self.get(name).await? {
            Some(link) => classify_existing(&link)?,
            None => {
                self.create_bridge(name).await?;
                BridgeOutcome::Created
            }
        };
        self.set_bridge_netfilter(name, CORRAL_BRIDGE_NETFILTER)
            .await?;
        self.set_group(name, STAMP_GROUP).await?;
        self.ensure_address(name, IpNet::V4(plan.gateway_v4))
            .await?;
        if let Some(v6) = plan.gateway_v6 {
            self.ensure_address(name, IpNet::V6(v6)).await?;
        }
        self.set_up(name).await?;
        Ok(outcome)
    }

    /// [`Links::ensure_bridge`] for every bridge of `plans`, from one dump
    /// of the links and one of the addresses: a bridge already as planned
    /// (switches, addresses, up) costs no request at all, so a re-apply of
    /// hundreds of profiles does not dump the namespace per bridge.
    pub async fn ensure_bridges(
        &self,
        plans: &[BridgePlan],
    ) -> Result<Vec<BridgeOutcome>, LinkError> {
        let all = self.list().await?;
        let mut addresses = self.all_addresses().await?;
        let mut out = Vec::with_capacity(plans.len());
        for plan in plans {
            let name = plan.name.as_str();
            let Some(link) = all.iter().find(|l| l.name == name) else {
                out.push(self.ensure_bridge(plan).await?);
                continue;
            };
            let outcome = classify_existing(link)?;
            if link.netfilter != Some(CORRAL_BRIDGE_NETFILTER) {
                self.set_bridge_netfilter(name, CORRAL_BRIDGE_NETFILTER)
                    .await?;
            }
            if link.group != STAMP_GROUP {
                self.set_group(name, STAMP_GROUP).await?;
            }
            let have = addresses.remove(&link.index).unwrap_or_default();
            let wanted =
                std::iter::once(IpNet::V4(plan.gateway_v4)).chain(plan.gateway_v6.map(IpNet::V6));
            for addr in wanted.filter(|a| !have.contains(a)) {
                self.add_address(name, addr).await?;
            }
            if !link.up {
                self.set_up(name).await?;
            }
            out.push(outcome);
        }
        Ok(out)
    }

    /// Sets a bridge's own br_netfilter switches.
    pub async fn set_bridge_netfilter(
        &self,
        name: &str,
        nf: BridgeNetfilter,
    ) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        let msg = rtnetlink::LinkMessageBuilder::<rtnetlink::LinkBridge>::new(name)
            .index(link.index)
            .nf_call_iptables(nf.iptables)
            .nf_call_ip6tables(nf.ip6tables)
            .nf_call_arptables(nf.arptables)
            .build();
        self.handle
            .link()
            .change(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("set br_netfilter switches of `{name}`"), e))
    }

    /// Every port of `bridge`.
    pub async fn ports_of(&self, bridge: &str) -> Result<Vec<LinkState>, LinkError> {
        let br = self.require(bridge).await?;
        Ok(self
            .list()
            .await?
            .into_iter()
            .filter(|l| l.controller == Some(br.index))
            .collect())
    }

    /// Creates a stamped bridge, down (the caller brings it up once the
    /// rules are in place).
    pub async fn create_bridge(&self, name: &str) -> Result<(), LinkError> {
        let msg = rtnetlink::LinkBridge::new(name).build();
        match self.handle.link().add(msg).execute().await {
            Ok(()) => {}
            Err(e) => return Err(LinkError::netlink(format!("create bridge `{name}`"), e)),
        }
        // The alias is set in a second request: the kernel applies
        // IFLA_IFALIAS in its "set link" path, not when creating a link.
        let link = self.require(name).await?;
        let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
            .alias(STAMP)
            .append_extra_attribute(netlink_packet_route::link::LinkAttribute::Group(
                STAMP_GROUP,
            ))
            .build();
        if let Err(e) = self.handle.link().set(msg).execute().await {
            // Without the stamp teardown would never remove it; undo.
            let _ = self.handle.link().del(link.index).execute().await;
            return Err(LinkError::netlink(format!("stamp bridge `{name}`"), e));
        }
        Ok(())
    }

    /// Deletes `name` if it is a bridge carrying corral's stamp.
    ///
    /// Returns `Ok(false)` (and deletes nothing) when the link is absent,
    /// not a bridge, or not stamped.
    pub async fn delete_stamped_bridge(&self, name: &str) -> Result<bool, LinkError> {
        let Some(link) = self.get(name).await? else {
            return Ok(false);
        };
        if !link.is_stamped_bridge() {
            return Ok(false);
        }
        match self.handle.link().del(link.index).execute().await {
            Ok(()) => Ok(true),
            Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
            Err(e) => Err(LinkError::netlink(format!("delete bridge `{name}`"), e)),
        }
    }

    /// Every bridge corral created or uses (stamp or group) that `planned`
    /// does not name, with the names of its ports.
    pub async fn unplanned_bridges(
        &self,
        planned: &[&str],
    ) -> Result<Vec<(LinkState, Vec<String>)>, LinkError> {
        let all = self.list().await?;
        Ok(all
            .iter()
            .filter(|l| l.is_corral_bridge() && !planned.contains(&l.name.as_str()))
            .map(|b| {
                let ports = all
                    .iter()
                    .filter(|l| l.controller == Some(b.index))
                    .map(|l| l.name.clone())
                    .collect();
                (b.clone(), ports)
            })
            .collect())
    }

    /// Every bridge in the namespace that carries corral's stamp.
    pub async fn stamped_bridges(&self) -> Result<Vec<LinkState>, LinkError> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .filter(LinkState::is_stamped_bridge)
            .collect())
    }
}

fn classify_existing(link: &LinkState) -> Result<BridgeOutcome, LinkError> {
    match link.kind.as_deref() {
        Some("bridge") if link.alias.as_deref() == Some(STAMP) => Ok(BridgeOutcome::Managed),
        Some("bridge") => Ok(BridgeOutcome::Adopted),
        other => Err(LinkError::NotABridge {
            name: link.name.clone(),
            kind: other.unwrap_or("kind-less").to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(kind: Option<&str>, alias: Option<&str>) -> LinkState {
        LinkState {
            index: 3,
            name: "br0".into(),
            up: false,
            alias: alias.map(str::to_owned),
            kind: kind.map(str::to_owned),
            controller: None,
            isolated: None,
            netfilter: None,
            group: 0,
            mac: None,
            mtu: None,
        }
    }

    #[test]
    fn only_a_stamped_bridge_is_managed() {
        assert_eq!(
            classify_existing(&link(Some("bridge"), Some(STAMP))).unwrap(),
            BridgeOutcome::Managed
        );
        assert_eq!(
            classify_existing(&link(Some("bridge"), Some("lab bridge"))).unwrap(),
            BridgeOutcome::Adopted
        );
        assert_eq!(
            classify_existing(&link(Some("bridge"), None)).unwrap(),
            BridgeOutcome::Adopted
        );
        assert!(!link(Some("veth"), Some(STAMP)).is_stamped_bridge());
    }

    #[test]
    fn a_non_bridge_is_refused_with_its_kind() {
        let err = classify_existing(&link(Some("veth"), None)).unwrap_err();
        assert!(err.to_string().contains("veth link, not a bridge"), "{err}");
    }
}
