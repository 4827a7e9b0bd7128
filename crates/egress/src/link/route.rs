//! The kernel's routing decision for one packet arriving on a bridge
//! (`RTM_GETROUTE` with the input interface, as `ip route get DST from SRC
//! iif BRIDGE` asks): whether it is for the host, leaves by which link, or
//! is refused. What `corral explain` walks the live rules along.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures::TryStreamExt;
use netlink_packet_route::route::{RouteAttribute, RouteType};

use super::{LinkError, Links, errno};
use crate::nft::live_trace::{Iface, Route};

impl Links {
    /// Where the kernel routes a packet from `src` to `dst` arriving on
    /// `iif` (which must exist). A refusal the kernel answers (no route,
    /// forwarding off, a martian source) is [`Route::Refused`], not an
    /// error.
    pub async fn route_of(&self, iif: u32, src: IpAddr, dst: IpAddr) -> Result<Route, LinkError> {
        let msg = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new()
                .source_prefix(s, 32)
                .destination_prefix(d, 32)
                .input_interface(iif)
                .build(),
            (IpAddr::V6(s), IpAddr::V6(d)) => rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new()
                .source_prefix(s, 128)
                .destination_prefix(d, 128)
                .input_interface(iif)
                .build(),
            _ => {
                return Ok(Route::Refused(format!(
                    "{src} and {dst} are of different families"
                )));
            }
        };
        let answer = self.handle().route().get(msg).execute().try_next().await;
        let route = match answer {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Route::Refused(format!("the kernel has no route to {dst}"))),
            Err(e) => {
                return match errno(&e) {
                    Some(code) => Ok(Route::Refused(format!(
                        "the kernel refuses to route it from {src} to {dst}: {}",
                        std::io::Error::from_raw_os_error(code)
                    ))),
                    None => Err(LinkError::netlink(format!("route {src} to {dst}"), e)),
                };
            }
        };
        match route.header.kind {
            RouteType::Local => return Ok(Route::Local),
            RouteType::Unicast => {}
            other => {
                return Ok(Route::Refused(format!(
                    "the route to {dst} is of type {other:?}"
                )));
            }
        }
        let Some(oif) = route.attributes.iter().find_map(|a| match a {
            RouteAttribute::Oif(i) => Some(*i),
            _ => None,
        }) else {
            return Ok(Route::Refused(format!(
                "the route to {dst} names no interface"
            )));
        };
        let link = self
            .list()
            .await?
            .into_iter()
            .find(|l| l.index == oif)
            .ok_or_else(|| LinkError::NoSuchLink(format!("index {oif}")))?;
        Ok(Route::Forward(Iface {
            name: link.name,
            group: link.group,
        }))
    }
}
