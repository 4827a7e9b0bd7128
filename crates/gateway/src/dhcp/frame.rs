//! A reply as the frame that carries it: Ethernet from the bridge's MAC,
//! IPv4 from the gateway, UDP 67 → 68, the message padded to BOOTP's
//! minimum size.

use std::io;

use dhcproto::Encodable;
use dhcproto::v4::{CLIENT_PORT, MIN_PACKET_SIZE, SERVER_PORT};
use etherparse::PacketBuilder;

use super::Reply;

/// The frame carrying `reply` from the gateway (`from_mac`, the bridge's
/// MAC; the source address is the reply's server identifier, the
/// gateway).
pub fn reply_frame(
    reply: &Reply,
    from_mac: [u8; 6],
    gateway: std::net::Ipv4Addr,
) -> io::Result<Vec<u8>> {
    let mut payload = reply
        .message
        .to_vec()
        .map_err(|e| io::Error::other(format!("encoding a DHCP reply: {e}")))?;
    if payload.len() < MIN_PACKET_SIZE {
        payload.resize(MIN_PACKET_SIZE, 0);
    }
    let builder = PacketBuilder::ethernet2(from_mac, reply.to_mac)
        .ipv4(gateway.octets(), reply.to_ip.octets(), 64)
        .udp(SERVER_PORT, CLIENT_PORT);
    let mut frame = Vec::with_capacity(builder.size(payload.len()));
    builder
        .write(&mut frame, &payload)
        .map_err(|e| io::Error::other(format!("building a DHCP reply frame: {e}")))?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::super::{Network, Reservation, Server};
    use super::*;
    use corral_sandbox_core::{InterfaceName, MacAddr};
    use dhcproto::Decodable;
    use dhcproto::v4::{DhcpOption, Flags, Message, MessageType};
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use std::net::Ipv4Addr;

    #[test]
    fn the_frame_carries_the_message_from_the_gateway_to_the_client() {
        let gw = Ipv4Addr::new(10, 9, 0, 1);
        let mac = [2, 0, 0, 0, 0, 7];
        let s = Server::new(
            Network {
                gateway: gw,
                subnet: "10.9.0.0/24".parse().unwrap(),
                dns: None,
                lease_secs: 60,
            },
            vec![Reservation {
                mac: MacAddr(mac),
                addr: Ipv4Addr::new(10, 9, 0, 7),
                port: InterfaceName::new("vp-7".to_owned()).unwrap(),
                v6: None,
            }],
        );
        let u = Ipv4Addr::UNSPECIFIED;
        let mut d = Message::new_with_id(42, u, u, u, u, &mac);
        d.set_flags(Flags::default());
        d.opts_mut()
            .insert(DhcpOption::MessageType(MessageType::Discover));
        let reply = s.reply(&d).unwrap();
        let bridge = [2, 0, 0, 0, 0, 1];
        let f = reply_frame(&reply, bridge, gw).unwrap();
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let eth = p.link.as_ref().unwrap().to_header().unwrap();
        let etherparse::LinkHeader::Ethernet2(eth) = eth else {
            panic!("{eth:?}")
        };
        assert_eq!((eth.source, eth.destination), (bridge, mac));
        let Some(NetSlice::Ipv4(ip)) = &p.net else {
            panic!()
        };
        assert_eq!(ip.header().source(), gw.octets());
        assert_eq!(ip.header().destination(), [10, 9, 0, 7]);
        let Some(TransportSlice::Udp(udp)) = &p.transport else {
            panic!()
        };
        assert_eq!((udp.source_port(), udp.destination_port()), (67, 68));
        assert!(udp.payload().len() >= MIN_PACKET_SIZE);
        let back = Message::from_bytes(udp.payload()).unwrap();
        assert_eq!(back.yiaddr(), Ipv4Addr::new(10, 9, 0, 7));
        assert_eq!(back.opts().msg_type(), Some(MessageType::Offer));
    }
}
