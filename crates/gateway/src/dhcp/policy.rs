//! What the server answers to one message (RFC 2131 §4.3), by
//! reservation only. Pure: no socket, no clock, no state changes, so no
//! message can alter what any other message gets.

use std::net::Ipv4Addr;

use dhcproto::v4::{DhcpOption, HType, Message, MessageType, Opcode, OptionCode};

use super::{BROADCAST_MAC, Granted, Reply, Reservation, Server};

/// What kind of answer a message earns.
enum Answer {
    Offer,
    Ack,
    Nak,
    /// An ACK to an INFORM: configuration without a lease.
    Inform,
}

impl Server {
    /// The reply to `request`, or `None` when it gets none (not a DHCP
    /// request for Ethernet, relayed, no reservation for its `chaddr`, a
    /// DECLINE, RELEASE or a kind the server does not answer, a REQUEST
    /// for another server).
    pub fn reply(&self, request: &Message) -> Option<Reply> {
        if request.opcode() != Opcode::BootRequest
            || request.htype() != HType::Eth
            || request.hlen() != 6
            || !request.giaddr().is_unspecified()
        {
            return None;
        }
        let chaddr: [u8; 6] = request.chaddr().get(..6)?.try_into().ok()?;
        let reservation = self.reservation(chaddr)?;
        let opts = request.opts();
        let ciaddr = request.ciaddr();
        let answer = match opts.msg_type()? {
            MessageType::Discover => Answer::Offer,
            MessageType::Request => {
                if let Some(DhcpOption::ServerIdentifier(id)) =
                    opts.get(OptionCode::ServerIdentifier)
                    && *id != self.network.gateway
                {
                    // The client chose another server's offer.
                    return None;
                }
                let asked = match opts.get(OptionCode::RequestedIpAddress) {
                    Some(DhcpOption::RequestedIpAddress(ip)) => *ip,
                    _ if !ciaddr.is_unspecified() => ciaddr,
                    _ => return None,
                };
                if asked == reservation.addr {
                    Answer::Ack
                } else {
                    Answer::Nak
                }
            }
            // Only a client configured with its own address is told the
            // rest: the reply goes to `ciaddr`.
            MessageType::Inform if ciaddr == reservation.addr => Answer::Inform,
            // DECLINE, RELEASE and the rest: the reservation stands.
            _ => return None,
        };
        Some(self.answer(request, reservation, &answer))
    }

    fn answer(&self, request: &Message, reservation: &Reservation, answer: &Answer) -> Reply {
        let net = &self.network;
        let (kind, yiaddr) = match answer {
            Answer::Offer => (MessageType::Offer, reservation.addr),
            Answer::Ack => (MessageType::Ack, reservation.addr),
            Answer::Nak => (MessageType::Nak, Ipv4Addr::UNSPECIFIED),
            Answer::Inform => (MessageType::Ack, Ipv4Addr::UNSPECIFIED),
        };
        // A client already at its address is answered there; a `ciaddr`
        // naming any other address is not echoed, nor sent to.
        let ciaddr = match answer {
            Answer::Ack | Answer::Inform if request.ciaddr() == reservation.addr => {
                reservation.addr
            }
            _ => Ipv4Addr::UNSPECIFIED,
        };
        let mut m = Message::new_with_id(
            request.xid(),
            ciaddr,
            yiaddr,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            &reservation.mac.octets(),
        );
        m.set_opcode(Opcode::BootReply).set_flags(request.flags());
        let o = m.opts_mut();
        o.insert(DhcpOption::MessageType(kind));
        o.insert(DhcpOption::ServerIdentifier(net.gateway));
        if !matches!(answer, Answer::Nak) {
            o.insert(DhcpOption::SubnetMask(net.subnet.netmask()));
            o.insert(DhcpOption::BroadcastAddr(net.subnet.broadcast()));
            o.insert(DhcpOption::Router(vec![net.gateway]));
            if let Some(dns) = net.dns {
                o.insert(DhcpOption::DomainNameServer(vec![dns]));
            }
        }
        if matches!(answer, Answer::Offer | Answer::Ack) {
            o.insert(DhcpOption::AddressLeaseTime(net.lease_secs));
            o.insert(DhcpOption::Renewal(net.lease_secs / 2));
            o.insert(DhcpOption::Rebinding(
                u32::try_from(u64::from(net.lease_secs) * 7 / 8).unwrap_or(u32::MAX),
            ));
        }
        // RFC 2131 §4.1: a NAK is broadcast; a client with its address
        // (renewing, informing) gets it there; one asking for broadcast
        // replies gets them; the rest at the address it is given. The
        // frame leaves by the client's port alone either way.
        let broadcast = (Ipv4Addr::BROADCAST, BROADCAST_MAC);
        let (to_ip, to_mac) = match answer {
            Answer::Nak => broadcast,
            _ if !ciaddr.is_unspecified() => (ciaddr, reservation.mac.octets()),
            _ if request.flags().broadcast() => broadcast,
            _ => (yiaddr, reservation.mac.octets()),
        };
        let granted = matches!(answer, Answer::Ack).then_some(Granted {
            mac: reservation.mac,
            addr: reservation.addr,
            secs: net.lease_secs,
        });
        Reply {
            message: m,
            port: reservation.port.clone(),
            to_mac,
            to_ip,
            granted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Network;
    use super::*;
    use corral_sandbox_core::{InterfaceName, MacAddr};
    use dhcproto::v4::Flags;
    use proptest::prelude::*;

    /// A BOOTREQUEST as a client without an address sends one.
    fn request(kind: MessageType, xid: u32, chaddr: [u8; 6]) -> Message {
        let unspecified = Ipv4Addr::UNSPECIFIED;
        let mut m = Message::new_with_id(
            xid,
            unspecified,
            unspecified,
            unspecified,
            unspecified,
            &chaddr,
        );
        m.set_flags(Flags::default().set_broadcast());
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        m
    }

    const GW: Ipv4Addr = Ipv4Addr::new(10, 99, 7, 1);
    const A: [u8; 6] = [0x02, 0xc0, 0, 0, 0, 2];
    const B: [u8; 6] = [0x02, 0xc0, 0, 0, 0, 3];
    const A_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 7, 2);
    const B_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 7, 3);

    fn server(dns: bool) -> Server {
        let r = |mac, addr, port: &str| Reservation {
            mac: MacAddr(mac),
            addr,
            port: InterfaceName::new(port.to_owned()).unwrap(),
            v6: None,
        };
        Server::new(
            Network {
                gateway: GW,
                subnet: "10.99.7.0/24".parse().unwrap(),
                dns: dns.then_some(GW),
                lease_secs: 3600,
            },
            vec![r(A, A_IP, "vp-a"), r(B, B_IP, "vp-b")],
        )
    }

    fn with(mut m: Message, opt: DhcpOption) -> Message {
        m.opts_mut().insert(opt);
        m
    }

    fn kind(r: &Reply) -> MessageType {
        r.message.opts().msg_type().unwrap()
    }

    #[test]
    fn a_discover_is_offered_the_reservation_with_the_network() {
        let r = server(true)
            .reply(&request(MessageType::Discover, 7, A))
            .unwrap();
        assert_eq!(kind(&r), MessageType::Offer);
        assert_eq!(r.message.yiaddr(), A_IP);
        assert_eq!(r.message.xid(), 7);
        assert_eq!(r.message.opcode(), Opcode::BootReply);
        assert_eq!(r.message.chaddr(), &A);
        assert_eq!(r.port.as_str(), "vp-a");
        // Broadcast flag set: broadcast, but only out of the port.
        assert_eq!((r.to_ip, r.to_mac), (Ipv4Addr::BROADCAST, BROADCAST_MAC));
        assert_eq!(r.granted, None);
        let o = r.message.opts();
        assert_eq!(
            o.get(OptionCode::Router),
            Some(&DhcpOption::Router(vec![GW]))
        );
        assert_eq!(
            o.get(OptionCode::DomainNameServer),
            Some(&DhcpOption::DomainNameServer(vec![GW]))
        );
        assert_eq!(
            o.get(OptionCode::SubnetMask),
            Some(&DhcpOption::SubnetMask(Ipv4Addr::new(255, 255, 255, 0)))
        );
        assert_eq!(
            o.get(OptionCode::AddressLeaseTime),
            Some(&DhcpOption::AddressLeaseTime(3600))
        );
        assert_eq!(o.get(OptionCode::Renewal), Some(&DhcpOption::Renewal(1800)));
        assert_eq!(
            o.get(OptionCode::Rebinding),
            Some(&DhcpOption::Rebinding(3150))
        );
        assert!(
            server(false)
                .reply(&request(MessageType::Discover, 7, A))
                .unwrap()
                .message
                .opts()
                .get(OptionCode::DomainNameServer)
                .is_none()
        );
    }

    #[test]
    fn no_reservation_no_answer() {
        let s = server(true);
        for k in [
            MessageType::Discover,
            MessageType::Request,
            MessageType::Inform,
        ] {
            assert_eq!(s.reply(&request(k, 1, [2, 0, 0, 0, 0, 9])), None);
        }
    }

    #[test]
    fn a_request_for_the_reservation_is_acked_and_for_anything_else_naked() {
        let s = server(true);
        let asked = |ip| {
            with(
                with(
                    request(MessageType::Request, 2, A),
                    DhcpOption::RequestedIpAddress(ip),
                ),
                DhcpOption::ServerIdentifier(GW),
            )
        };
        let ack = s.reply(&asked(A_IP)).unwrap();
        assert_eq!(kind(&ack), MessageType::Ack);
        assert_eq!(
            ack.granted,
            Some(Granted {
                mac: MacAddr(A),
                addr: A_IP,
                secs: 3600
            })
        );
        // The sibling's address: refused, and the refusal says nothing else.
        let nak = s.reply(&asked(B_IP)).unwrap();
        assert_eq!(kind(&nak), MessageType::Nak);
        assert_eq!(nak.message.yiaddr(), Ipv4Addr::UNSPECIFIED);
        assert_eq!(nak.port.as_str(), "vp-a");
        assert_eq!(nak.granted, None);
        assert_eq!(nak.message.opts().len(), 2);
        // Another server's offer chosen: silence.
        let other = with(
            with(
                request(MessageType::Request, 2, A),
                DhcpOption::RequestedIpAddress(A_IP),
            ),
            DhcpOption::ServerIdentifier(Ipv4Addr::new(10, 99, 7, 254)),
        );
        assert_eq!(s.reply(&other), None);
        // A REQUEST naming no address at all: silence.
        assert_eq!(s.reply(&request(MessageType::Request, 2, A)), None);
    }

    #[test]
    fn a_renewal_is_acked_unicast_to_the_clients_address() {
        let s = server(true);
        let mut renew = request(MessageType::Request, 3, A);
        renew.set_ciaddr(A_IP).set_flags(Flags::default());
        let r = s.reply(&renew).unwrap();
        assert_eq!(kind(&r), MessageType::Ack);
        assert_eq!((r.to_ip, r.to_mac), (A_IP, A));
        assert_eq!(r.message.ciaddr(), A_IP);
        // Renewing the sibling's address from A's MAC: NAK, to A only.
        renew.set_ciaddr(B_IP);
        let r = s.reply(&renew).unwrap();
        assert_eq!(kind(&r), MessageType::Nak);
        assert_eq!(r.port.as_str(), "vp-a");
    }

    #[test]
    fn without_the_broadcast_flag_an_offer_goes_to_the_offered_address() {
        let mut d = request(MessageType::Discover, 4, B);
        d.set_flags(Flags::default());
        let r = server(true).reply(&d).unwrap();
        assert_eq!((r.to_ip, r.to_mac), (B_IP, B));
        assert_eq!(r.port.as_str(), "vp-b");
    }

    #[test]
    fn decline_and_release_get_nothing_and_change_nothing() {
        let s = server(true);
        let before = s.clone();
        for k in [MessageType::Decline, MessageType::Release] {
            let m = with(request(k, 5, B), DhcpOption::RequestedIpAddress(B_IP));
            assert_eq!(s.reply(&m), None);
        }
        assert_eq!(s, before);
        // B still gets its own address.
        let ack = s
            .reply(&with(
                request(MessageType::Request, 6, B),
                DhcpOption::RequestedIpAddress(B_IP),
            ))
            .unwrap();
        assert_eq!((kind(&ack), ack.message.yiaddr()), (MessageType::Ack, B_IP));
    }

    #[test]
    fn an_inform_is_answered_only_at_the_clients_own_address() {
        let s = server(true);
        let mut inform = request(MessageType::Inform, 8, A);
        inform.set_ciaddr(A_IP);
        let r = s.reply(&inform).unwrap();
        assert_eq!(kind(&r), MessageType::Ack);
        assert_eq!(r.message.yiaddr(), Ipv4Addr::UNSPECIFIED);
        assert!(r.message.opts().get(OptionCode::AddressLeaseTime).is_none());
        assert_eq!((r.to_ip, r.granted), (A_IP, None));
        inform.set_ciaddr(B_IP);
        assert_eq!(s.reply(&inform), None);
    }

    #[test]
    fn replies_relayed_and_non_ethernet_messages_are_ignored() {
        let s = server(true);
        let mut m = request(MessageType::Discover, 9, A);
        m.set_opcode(Opcode::BootReply);
        assert_eq!(s.reply(&m), None);
        let mut m = request(MessageType::Discover, 9, A);
        m.set_giaddr(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(s.reply(&m), None);
        let mut m = request(MessageType::Discover, 9, A);
        m.set_htype(HType::from(6));
        assert_eq!(s.reply(&m), None);
        let m = Message::new_with_id(
            9,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::UNSPECIFIED,
            &[A.as_slice(), &[0, 0]].concat(),
        );
        assert_eq!(s.reply(&m), None, "hlen 8 with a reserved prefix");
    }

    fn any_request() -> impl Strategy<Value = Message> {
        let mac = prop_oneof![Just(A), Just(B), any::<[u8; 6]>()];
        let ip = prop_oneof![
            Just(A_IP),
            Just(B_IP),
            Just(Ipv4Addr::UNSPECIFIED),
            any::<u32>().prop_map(Ipv4Addr::from)
        ];
        let server_id = prop_oneof![
            Just(None),
            Just(Some(GW)),
            any::<u32>().prop_map(|n| Some(Ipv4Addr::from(n)))
        ];
        (
            mac,
            1u8..=18,
            any::<u32>(),
            proptest::option::of(ip.clone()),
            ip,
            server_id,
            any::<bool>(),
            proptest::option::of(any::<Vec<u8>>()),
        )
            .prop_map(|(mac, kind, xid, asked, ciaddr, sid, bcast, clid)| {
                let mut m = request(MessageType::from(kind), xid, mac);
                m.set_ciaddr(ciaddr);
                if !bcast {
                    m.set_flags(Flags::default());
                }
                if let Some(ip) = asked {
                    m.opts_mut().insert(DhcpOption::RequestedIpAddress(ip));
                }
                if let Some(ip) = sid {
                    m.opts_mut().insert(DhcpOption::ServerIdentifier(ip));
                }
                if let Some(id) = clid {
                    m.opts_mut().insert(DhcpOption::ClientIdentifier(id));
                }
                m
            })
    }

    proptest! {
        /// The law: whatever a client sends, a reply names only the
        /// client's own reservation, leaves only by that reservation's
        /// port, to that client or broadcast on that port; and only a
        /// REQUEST for the reservation itself grants a lease.
        #[test]
        fn a_reply_only_ever_carries_the_clients_own_reservation(m in any_request()) {
            let s = server(true);
            let Some(r) = s.reply(&m) else { return Ok(()) };
            let own = s
                .reservations()
                .iter()
                .find(|res| res.mac.octets() == m.chaddr()[..6])
                .unwrap();
            prop_assert_eq!(&r.port, &own.port);
            prop_assert_eq!(r.message.chaddr(), &own.mac.octets());
            prop_assert!([own.addr, Ipv4Addr::UNSPECIFIED].contains(&r.message.yiaddr()));
            prop_assert!([own.addr, Ipv4Addr::BROADCAST].contains(&r.to_ip));
            prop_assert!([own.mac.octets(), BROADCAST_MAC].contains(&r.to_mac));
            prop_assert_eq!(r.message.xid(), m.xid());
            if let Some(g) = r.granted {
                prop_assert_eq!((g.mac, g.addr), (own.mac, own.addr));
                prop_assert_eq!(m.opts().msg_type(), Some(MessageType::Request));
            }
            prop_assert!(!matches!(
                m.opts().msg_type(),
                Some(MessageType::Decline | MessageType::Release)
            ));
        }
    }
}
