//! Links over rtnetlink: profile bridges (create or adopt, stamp, address,
//! up, teardown), veth pairs, bridge ports with port isolation, addresses
//! and routes; [`LinkWatch`] hears about ports joining and leaving bridges,
//! [`BridgeWatch`] about any change to given bridges, their ports,
//! addresses and static neighbours.
//!
//! Everything goes through one [`Links`] handle, which owns an rtnetlink
//! connection bound to the namespace it was opened in. Open it inside
//! [`crate::netns::Netns::run_async`] to work in another namespace.

mod addr;
mod bridge;
mod bridge_watch;
#[cfg(any(test, feature = "test-support"))]
pub mod guest;
mod neighbour;
mod port;
mod route;
mod watch;

use futures::TryStreamExt;
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use rtnetlink::Handle;

pub use bridge::{BridgeNetfilter, BridgeOutcome, CORRAL_BRIDGE_NETFILTER, STAMP, STAMP_GROUP};
pub use bridge_watch::{BridgeEvent, BridgeWatch};
pub(crate) use watch::poll_readable;
pub use watch::{LinkEvent, LinkWatch};

/// A link operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The netlink socket could not be opened.
    #[error("cannot open a route netlink socket: {0}")]
    Connect(#[source] std::io::Error),
    /// The kernel refused for lack of privilege.
    #[error("{op}: permission denied; CAP_NET_ADMIN is missing, run as root")]
    Privilege {
        /// What was attempted.
        op: String,
    },
    /// The kernel answered a request with an error.
    #[error("{op}: {source}")]
    Netlink {
        /// What was attempted.
        op: String,
        /// The kernel's answer.
        #[source]
        source: rtnetlink::Error,
    },
    /// An interface that must exist does not.
    #[error("interface `{0}` does not exist; create it or fix the name")]
    NoSuchLink(String),
    /// A route's destination and gateway are of different families.
    #[error("route {dest} via {via}: destination and gateway must both be IPv4 or both IPv6")]
    MixedFamilies {
        /// Destination.
        dest: ipnet::IpNet,
        /// Gateway.
        via: std::net::IpAddr,
    },
    /// A name corral wants for a bridge is taken by another kind of link.
    #[error(
        "`{name}` exists but is a {kind} link, not a bridge; remove it or give the profile another bridge name"
    )]
    NotABridge {
        /// Interface name.
        name: String,
        /// Its kind as the kernel reports it.
        kind: String,
    },
}

impl LinkError {
    /// Wraps an rtnetlink error, naming the missing capability on EPERM.
    pub(crate) fn netlink(op: impl Into<String>, source: rtnetlink::Error) -> Self {
        let op = op.into();
        if errno(&source) == Some(libc::EPERM) {
            return Self::Privilege { op };
        }
        Self::Netlink { op, source }
    }
}

/// The positive errno of a netlink error answer, if it is one.
pub(crate) fn errno(err: &rtnetlink::Error) -> Option<i32> {
    match err {
        rtnetlink::Error::NetlinkError(msg) => msg.code.map(|c| -c.get()),
        _ => None,
    }
}

/// A link as read back from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// `IFF_UP` is set.
    pub up: bool,
    /// `IFLA_IFALIAS`, where corral's stamp lives.
    pub alias: Option<String>,
    /// The link kind (`bridge`, `veth`, …), if the kernel reports one.
    pub kind: Option<String>,
    /// Index of the bridge this link is a port of.
    pub controller: Option<u32>,
    /// Bridge-port isolation flag, for bridge ports.
    pub isolated: Option<bool>,
    /// The bridge's own br_netfilter switches, for bridges.
    pub netfilter: Option<BridgeNetfilter>,
    /// The netdev group (`IFLA_GROUP`; 0 is the default group).
    pub group: u32,
    /// The link-layer address, when it is an Ethernet one.
    pub mac: Option<[u8; 6]>,
    /// The MTU.
    pub mtu: Option<u32>,
}

impl LinkState {
    fn from_message(msg: &LinkMessage) -> Self {
        let mut state = LinkState {
            index: msg.header.index,
            name: String::new(),
            up: msg.header.flags.contains(LinkFlags::Up),
            alias: None,
            kind: None,
            controller: None,
            isolated: None,
            netfilter: None,
            group: 0,
            mac: None,
            mtu: None,
        };
        for attr in &msg.attributes {
            match attr {
                LinkAttribute::Group(g) => state.group = *g,
                LinkAttribute::Address(a) => state.mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
                LinkAttribute::Mtu(m) => state.mtu = Some(*m),
                LinkAttribute::IfName(n) => state.name.clone_from(n),
                LinkAttribute::IfAlias(a) => state.alias = Some(a.clone()),
                LinkAttribute::Controller(c) => state.controller = Some(*c),
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        match info {
                            LinkInfo::Kind(k) => state.kind = Some(kind_name(k)),
                            LinkInfo::Data(netlink_packet_route::link::InfoData::Bridge(opts)) => {
                                state.netfilter = Some(BridgeNetfilter::from_info(opts));
                            }
                            LinkInfo::PortData(
                                netlink_packet_route::link::InfoPortData::BridgePort(opts),
                            ) => {
                                for o in opts {
                                    if let netlink_packet_route::link::InfoBridgePort::Isolated(v) =
                                        o
                                    {
                                        state.isolated = Some(*v);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        state
    }

    /// True when this is a bridge carrying corral's stamp.
    pub fn is_stamped_bridge(&self) -> bool {
        self.kind.as_deref() == Some("bridge") && self.alias.as_deref() == Some(STAMP)
    }

    /// True when this is a bridge corral created (stamped) or uses (its
    /// group): one whose traffic corral's rules govern.
    pub fn is_corral_bridge(&self) -> bool {
        self.kind.as_deref() == Some("bridge")
            && (self.alias.as_deref() == Some(STAMP)
                || self.group == crate::plan::fail_closed::STAMP_GROUP)
    }
}

fn kind_name(kind: &InfoKind) -> String {
    match kind {
        InfoKind::Bridge => "bridge".to_owned(),
        InfoKind::Veth => "veth".to_owned(),
        InfoKind::Dummy => "dummy".to_owned(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// An rtnetlink connection in the namespace it was opened in.
#[derive(Debug, Clone)]
pub struct Links {
    handle: Handle,
}

impl Links {
    /// Opens a connection and spawns its driver on the current tokio runtime.
    pub fn connect() -> Result<Self, LinkError> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(LinkError::Connect)?;
        tokio::spawn(conn);
        Ok(Self { handle })
    }

    /// The raw rtnetlink handle, for requests this module does not wrap.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Looks a link up by name; `None` when it does not exist.
    pub async fn get(&self, name: &str) -> Result<Option<LinkState>, LinkError> {
        let mut stream = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute();
        match stream.try_next().await {
            Ok(Some(msg)) => Ok(Some(LinkState::from_message(&msg))),
            Ok(None) => Ok(None),
            Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(LinkError::netlink(format!("read link `{name}`"), e)),
        }
    }

    /// Like [`Links::get`], but a missing link is an error.
    pub async fn require(&self, name: &str) -> Result<LinkState, LinkError> {
        self.get(name)
            .await?
            .ok_or_else(|| LinkError::NoSuchLink(name.to_owned()))
    }

    /// Every link in the namespace.
    pub async fn list(&self) -> Result<Vec<LinkState>, LinkError> {
        self.handle
            .link()
            .get()
            .execute()
            .map_ok(|m| LinkState::from_message(&m))
            .try_collect()
            .await
            .map_err(|e| LinkError::netlink("list links", e))
    }

    /// Sets a link up.
    pub async fn set_up(&self, name: &str) -> Result<(), LinkError> {
        self.set_state(name, true).await
    }

    /// Sets a link down: a bridge port that is down forwards nothing either
    /// way (how a watcher cuts a sandbox off at once).
    pub async fn set_down(&self, name: &str) -> Result<(), LinkError> {
        self.set_state(name, false).await
    }

    async fn set_state(&self, name: &str, up: bool) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        let msg = rtnetlink::LinkUnspec::new_with_index(link.index);
        let msg = if up { msg.up() } else { msg.down() }.build();
        let word = if up { "up" } else { "down" };
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("set `{name}` {word}"), e))
    }

    /// Puts a link in netdev group `group`.
    pub async fn set_group(&self, name: &str, group: u32) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
            .append_extra_attribute(LinkAttribute::Group(group))
            .build();
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("set the group of `{name}`"), e))
    }

    /// Sets a link's MAC address (before it is up, so the IPv6 link-local
    /// address the kernel derives comes from it).
    pub async fn set_mac(&self, name: &str, mac: [u8; 6]) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
            .address(mac.to_vec())
            .build();
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("set the MAC of `{name}`"), e))
    }

    /// Deletes a link by name (a veth's peer goes with it).
    pub async fn delete(&self, name: &str) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        self.handle
            .link()
            .del(link.index)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("delete link `{name}`"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_names_the_capability() {
        let mut msg = netlink_packet_core::ErrorMessage::default();
        msg.code = std::num::NonZeroI32::new(-libc::EPERM);
        let err = LinkError::netlink("create bridge `x`", rtnetlink::Error::NetlinkError(msg));
        let text = err.to_string();
        assert!(
            text.contains("CAP_NET_ADMIN") && text.contains("root"),
            "{text}"
        );
    }

    #[test]
    fn other_errors_keep_the_operation() {
        let mut msg = netlink_packet_core::ErrorMessage::default();
        msg.code = std::num::NonZeroI32::new(-libc::EEXIST);
        let err = LinkError::netlink("create bridge `x`", rtnetlink::Error::NetlinkError(msg));
        assert!(matches!(err, LinkError::Netlink { .. }));
        assert!(err.to_string().starts_with("create bridge `x`"));
    }
}
