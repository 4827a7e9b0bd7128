//! A guest on a bridge port, as a provider plugs a sandbox's NIC in: for
//! tests that bind a port the way the lifecycle binds one and then need
//! something behind it.

use std::os::fd::AsFd as _;

use super::{LinkError, Links};
use crate::netns::Netns;

/// A new namespace whose `eth0` (carrying `mac`, up) is the far end of a
/// veth `port` made in `host` and attached to `bridge` there (isolated, as
/// corral's ports are). Panics on failure: test support.
pub fn guest_on_bridge(host: &Netns, bridge: &str, port: &str, mac: [u8; 6]) -> Netns {
    let guest = Netns::new().unwrap_or_else(|e| panic!("a guest namespace: {e}"));
    let fd = guest
        .fd()
        .try_clone_to_owned()
        .unwrap_or_else(|e| panic!("the guest's descriptor: {e}"));
    let (port, bridge) = (port.to_owned(), bridge.to_owned());
    host.run_async(|| async move {
        let links = Links::connect()?;
        links.create_veth(&port, "eth0", Some(fd.as_fd())).await?;
        links.attach_port(&port, &bridge, true).await?;
        links.set_up(&port).await
    })
    .map_err(|e| e.to_string())
    .and_then(|r| r.map_err(|e: LinkError| e.to_string()))
    .unwrap_or_else(|e| panic!("the guest's port on the bridge: {e}"));
    guest
        .run_async(|| async move {
            let links = Links::connect()?;
            links.set_mac("eth0", mac).await?;
            links.set_up("eth0").await
        })
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e: LinkError| e.to_string()))
        .unwrap_or_else(|e| panic!("the guest's eth0: {e}"));
    guest
}
