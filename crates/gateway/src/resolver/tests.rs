use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use proptest::prelude::*;

use super::*;
use corral_sandbox_core::EgressMode;

fn policy() -> Policy {
    let p = corral_egress::plan::test_support::profile(
        "dev",
        "cb-dev",
        "10.9.0.0/24",
        EgressMode::Allowlist,
        &["api.corral.test:443/tcp", "*.cdn.corral.test"],
    );
    Policy::for_profile(&p, &["192.0.2.0/24".parse().unwrap()])
}

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn query(qname: &str, qtype: RecordType, edns: bool) -> Message {
    let mut m = Message::new();
    m.set_id(0x1234)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true);
    m.add_query(Query::query(name(qname), qtype));
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(4096);
        m.set_edns(e);
    }
    m
}

fn forwarded(p: &Policy, q: &Message) -> Message {
    match p.decide(q, 0xbeef) {
        Decision::Forward(m) => m,
        other => panic!("not forwarded: {other:?}"),
    }
}

fn answered(p: &Policy, q: &Message) -> Message {
    match p.decide(q, 0xbeef) {
        Decision::Answer(m) => m,
        other => panic!("not answered at once: {other:?}"),
    }
}

fn upstream(answers: Vec<Record>) -> Message {
    let mut m = Message::new();
    m.set_id(0xbeef)
        .set_message_type(MessageType::Response)
        .set_response_code(ResponseCode::NoError);
    m.insert_answers(answers);
    m
}

fn a(owner: &str, ip: [u8; 4], ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(Ipv4Addr::from(ip))))
}

fn cname(owner: &str, target: &str) -> Record {
    Record::from_rdata(name(owner), 300, RData::CNAME(CNAME(name(target))))
}

fn addrs(m: &Message) -> Vec<IpAddr> {
    m.answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unlisted_name_is_nxdomain_with_a_text_naming_the_profile_and_the_ask() {
    let r = answered(&policy(), &query("pypi.org.", RecordType::A, true));
    assert_eq!(r.response_code(), ResponseCode::NXDomain);
    assert_eq!(r.id(), 0x1234);
    assert_eq!(r.message_type(), MessageType::Response);
    let e = extended_errors(&r);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].code, EDE_BLOCKED);
    assert!(e[0].text.contains("profile `dev`"), "{}", e[0].text);
    assert!(e[0].text.contains("allow `pypi.org`"), "{}", e[0].text);
    // The apex of a wildcard is not admitted by it.
    let r = answered(&policy(), &query("cdn.corral.test.", RecordType::A, true));
    assert_eq!(r.response_code(), ResponseCode::NXDomain);
}

#[test]
fn a_client_without_edns_gets_no_edns_back() {
    let r = answered(&policy(), &query("pypi.org.", RecordType::A, false));
    assert_eq!(r.response_code(), ResponseCode::NXDomain);
    assert!(r.extensions().is_none());
    assert!(extended_errors(&r).is_empty());
}

#[test]
fn a_listed_query_goes_upstream_rebuilt_with_none_of_the_clients_options() {
    let mut q = query("Api.Corral.TEST.", RecordType::A, true);
    if let Some(e) = q.extensions_mut() {
        e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
            IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2)),
            24,
            0,
        )));
        e.options_mut()
            .insert(EdnsOption::Unknown(65001, b"exfiltrated data".to_vec()));
        e.set_dnssec_ok(true);
    }
    let up = forwarded(&policy(), &q);
    assert_eq!(up.id(), 0xbeef, "corral's id, not the client's");
    assert!(up.recursion_desired());
    assert_eq!(up.queries().len(), 1);
    assert_eq!(up.queries()[0].name().to_ascii(), "api.corral.test.");
    assert_eq!(up.queries()[0].query_type(), RecordType::A);
    assert_eq!(up.queries()[0].query_class(), DNSClass::IN);
    assert!(up.answers().is_empty() && up.name_servers().is_empty());
    assert!(up.additionals().is_empty());
    let edns = up.extensions().as_ref().unwrap();
    assert_eq!(edns.max_payload(), EDNS_PAYLOAD);
    assert!(!edns.flags().dnssec_ok);
    let bytes = up.to_vec().unwrap();
    assert!(
        !bytes.windows(11).any(|w| w == b"exfiltrated"),
        "client option bytes went upstream"
    );
    // The whole message: header, one question, an OPT with no option.
    assert_eq!(bytes.len(), 12 + "api.corral.test".len() + 2 + 4 + 11);
}

#[test]
fn a_query_with_records_or_two_questions_is_refused() {
    let mut q = query("api.corral.test.", RecordType::A, true);
    q.add_additional(Record::from_rdata(
        name("api.corral.test."),
        0,
        RData::TXT(TXT::new(vec!["data".to_owned()])),
    ));
    let r = answered(&policy(), &q);
    assert_eq!(r.response_code(), ResponseCode::FormErr);
    let mut q = query("api.corral.test.", RecordType::A, true);
    q.add_query(Query::query(name("x.cdn.corral.test."), RecordType::A));
    assert_eq!(
        answered(&policy(), &q).response_code(),
        ResponseCode::FormErr
    );
}

#[test]
fn other_types_opcodes_and_classes_are_not_forwarded() {
    let r = answered(&policy(), &query("api.corral.test.", RecordType::TXT, true));
    assert_eq!(r.response_code(), ResponseCode::NoError);
    assert!(r.answers().is_empty());
    assert_eq!(extended_errors(&r)[0].code, EDE_NOT_SUPPORTED);
    let mut q = query("api.corral.test.", RecordType::A, true);
    q.set_op_code(OpCode::Update);
    assert_eq!(
        answered(&policy(), &q).response_code(),
        ResponseCode::NotImp
    );
    let mut q = query("api.corral.test.", RecordType::A, true);
    let mut chaos = Query::query(name("api.corral.test."), RecordType::A);
    chaos.set_query_class(DNSClass::CH);
    q.take_queries();
    q.add_query(chaos);
    assert_eq!(
        answered(&policy(), &q).response_code(),
        ResponseCode::Refused
    );
}

#[test]
fn a_response_sent_to_the_gateway_is_ignored() {
    let mut q = query("api.corral.test.", RecordType::A, true);
    q.set_message_type(MessageType::Response);
    assert_eq!(policy().decide(&q, 1), Decision::Ignore);
}

#[test]
fn the_answer_keeps_only_the_chain_within_the_list_and_its_addresses() {
    let p = policy();
    let q = query("API.corral.test.", RecordType::A, true);
    let mut up = upstream(vec![
        cname("api.corral.test.", "edge.cdn.corral.test."),
        a("edge.cdn.corral.test.", [198, 18, 0, 1], 30),
        a("edge.cdn.corral.test.", [45, 0, 0, 1], 3600),
        // Not on the chain: never handed out.
        a("other.cdn.corral.test.", [45, 0, 0, 2], 30),
        a("api.corral.test.", [45, 0, 0, 3], 30),
    ]);
    up.add_name_server(a("ns.evil.test.", [45, 0, 0, 9], 30));
    up.add_additional(a("glue.evil.test.", [45, 0, 0, 8], 30));
    let out = p.answer(&q, &up);
    let r = &out.response;
    assert_eq!(r.response_code(), ResponseCode::NoError);
    assert_eq!(r.id(), 0x1234);
    assert_eq!(r.queries(), q.queries(), "the client's question, as asked");
    assert!(r.name_servers().is_empty() && r.additionals().is_empty());
    assert_eq!(r.answers()[0].record_type(), RecordType::CNAME);
    // 198.18.0.1 (benchmarking) is reserved.
    assert_eq!(addrs(r), vec![IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1))]);
    assert_eq!(out.refused, 1);
    assert_eq!(
        out.learned,
        vec![Learned {
            name: "edge.cdn.corral.test".to_owned(),
            addr: IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1)),
            ttl: 60,
        }],
        "learned at the chain's end, TTL at the ceiling"
    );
}

#[test]
fn an_alias_out_of_the_list_is_nxdomain_and_learns_nothing() {
    let p = policy();
    let q = query("api.corral.test.", RecordType::A, true);
    let up = upstream(vec![
        cname("api.corral.test.", "evil.example."),
        a("evil.example.", [45, 0, 0, 1], 30),
    ]);
    let out = p.answer(&q, &up);
    assert_eq!(out.response.response_code(), ResponseCode::NXDomain);
    assert!(out.learned.is_empty() && out.response.answers().is_empty());
    let e = extended_errors(&out.response);
    assert!(e[0].text.contains("alias of `evil.example`"), "{e:?}");
}

#[test]
fn an_answer_of_reserved_or_host_addresses_only_is_nxdomain() {
    let p = policy();
    let q = query("api.corral.test.", RecordType::A, true);
    let up = upstream(vec![
        a("api.corral.test.", [10, 0, 0, 1], 30),
        a("api.corral.test.", [169, 254, 169, 254], 30),
        a("api.corral.test.", [192, 0, 2, 7], 30), // the host's network here
    ]);
    let out = p.answer(&q, &up);
    assert_eq!(out.response.response_code(), ResponseCode::NXDomain);
    assert_eq!(out.refused, 3);
    assert!(out.learned.is_empty());
}

#[test]
fn answers_past_the_cap_are_cut_and_said_so() {
    let p = policy();
    let q = query("x.cdn.corral.test.", RecordType::AAAA, true);
    let up = upstream(
        (0..2_500u32)
            .map(|i| {
                Record::from_rdata(
                    name("x.cdn.corral.test."),
                    5,
                    RData::AAAA(AAAA(Ipv6Addr::from(
                        u128::from(Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0))
                            + u128::from(i),
                    ))),
                )
            })
            .collect(),
    );
    let out = p.answer(&q, &up);
    assert_eq!(out.learned.len(), DEFAULT_ANSWER_CAP);
    assert_eq!(out.cut, 2_500 - DEFAULT_ANSWER_CAP);
    assert_eq!(addrs(&out.response).len(), DEFAULT_ANSWER_CAP);
    let e = extended_errors(&out.response);
    assert!(e[0].text.contains("more were cut"), "{e:?}");
    assert!(
        out.learned.iter().all(|l| l.ttl == 5),
        "below the ceiling, as given"
    );
}

#[test]
fn upstream_failures_are_servfail_and_nxdomain_passes() {
    let p = policy();
    let q = query("api.corral.test.", RecordType::A, true);
    let mut up = upstream(vec![a("api.corral.test.", [45, 0, 0, 1], 30)]);
    up.set_response_code(ResponseCode::Refused);
    assert_eq!(
        p.answer(&q, &up).response.response_code(),
        ResponseCode::ServFail
    );
    up.set_response_code(ResponseCode::NXDomain);
    let out = p.answer(&q, &up);
    assert_eq!(out.response.response_code(), ResponseCode::NXDomain);
    assert!(out.learned.is_empty());
}

fn owner() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("api.corral.test.".to_owned()),
        Just("a.cdn.corral.test.".to_owned()),
        Just("b.cdn.corral.test.".to_owned()),
        Just("evil.example.".to_owned()),
        Just("cdn.corral.test.".to_owned()),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![
        (owner(), any::<[u8; 4]>(), any::<u32>()).prop_map(|(o, ip, ttl)| a(&o, ip, ttl)),
        (owner(), any::<u128>(), any::<u32>()).prop_map(|(o, ip, ttl)| Record::from_rdata(
            name(&o),
            ttl,
            RData::AAAA(AAAA(Ipv6Addr::from(ip)))
        )),
        (owner(), owner()).prop_map(|(o, t)| cname(&o, &t)),
        owner().prop_map(|o| Record::from_rdata(
            name(&o),
            1,
            RData::TXT(TXT::new(vec!["x".to_owned()]))
        )),
    ]
}

proptest! {
    /// Whatever the upstream answers: every record handed out is on the
    /// chain from the question through admitted names, every address is
    /// of the asked type, not refused, within the cap and TTL bounds, and
    /// exactly what `learned` says.
    #[test]
    fn an_answer_holds_only_what_the_policy_admits(
        answers in proptest::collection::vec(record(), 0..40),
        qtype in prop_oneof![Just(RecordType::A), Just(RecordType::AAAA)],
        cap in 1usize..8,
    ) {
        let mut p = policy();
        p.answer_cap = cap;
        let q = query("api.corral.test.", qtype, true);
        let out = p.answer(&q, &upstream(answers));
        let r = &out.response;
        prop_assert!(r.name_servers().is_empty() && r.additionals().is_empty());
        let mut current = "api.corral.test".to_owned();
        let mut got = Vec::new();
        for rec in r.answers() {
            let owner = super::query::text(rec.name());
            prop_assert!(p.names.admits(&owner), "{owner} handed out");
            match rec.data() {
                RData::CNAME(c) => {
                    prop_assert_eq!(&owner, &current);
                    prop_assert!(got.is_empty(), "an alias after an address");
                    current = super::query::text(&c.0);
                }
                RData::A(a) => { prop_assert_eq!(qtype, RecordType::A); got.push(IpAddr::V4(a.0)); }
                RData::AAAA(a) => { prop_assert_eq!(qtype, RecordType::AAAA); got.push(IpAddr::V6(a.0)); }
                other => prop_assert!(false, "{other:?} handed out"),
            }
            if !matches!(rec.data(), RData::CNAME(_)) {
                prop_assert_eq!(&owner, &current);
            }
            prop_assert!(rec.ttl() <= p.ttl_ceiling);
        }
        prop_assert!(got.len() <= cap);
        prop_assert!(got.iter().all(|ip| !p.refuses(*ip)));
        let learned: Vec<IpAddr> = out.learned.iter().map(|l| l.addr).collect();
        prop_assert_eq!(learned, got);
    }
}

mod exchange {
    use std::net::{SocketAddr, UdpSocket};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::test_upstream::TestUpstream;

    fn up(addr: SocketAddr) -> Upstreams {
        Upstreams::new(vec![addr], Duration::from_secs(5)).unwrap()
    }

    /// A UDP upstream on loopback that answers every query with `code`
    /// (and `answer`), keeping each query's bytes in `seen`.
    fn responder(
        code: ResponseCode,
        answer: Option<Record>,
        seen: Arc<Mutex<Vec<Vec<u8>>>>,
    ) -> SocketAddr {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                seen.lock().unwrap().push(buf[..n].to_vec());
                let q = Message::from_vec(&buf[..n]).unwrap();
                let mut r = Message::new();
                r.set_id(q.id())
                    .set_message_type(MessageType::Response)
                    .set_response_code(code);
                r.add_query(q.queries()[0].clone());
                r.add_answers(answer.clone());
                let _ = sock.send_to(&r.to_vec().unwrap(), from);
            }
        });
        addr
    }

    fn bytes(m: &Message) -> Vec<u8> {
        m.to_vec().unwrap()
    }

    async fn resolve(p: &Policy, q: &Message, t: Transport, u: &Upstreams) -> (Message, Exchange) {
        let x = p.resolve(&bytes(q), t, u).await;
        let m = Message::from_vec(x.response.as_deref().unwrap()).unwrap();
        (m, x)
    }

    #[tokio::test]
    async fn listed_names_resolve_through_the_upstream_and_unlisted_never_reach_it() {
        let upstream = TestUpstream::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        upstream.set(
            "api.corral.test",
            &[IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1))],
            30,
        );
        let u = up(upstream.addr());
        let p = policy();
        let (m, x) = resolve(
            &p,
            &query("api.corral.test.", RecordType::A, true),
            Transport::Udp,
            &u,
        )
        .await;
        assert_eq!(m.response_code(), ResponseCode::NoError);
        assert_eq!(m.id(), 0x1234);
        assert_eq!(addrs(&m), vec![IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1))]);
        assert!(x.forwarded);
        assert_eq!(x.learned.len(), 1);
        let (m, x) = resolve(
            &p,
            &query("pypi.org.", RecordType::A, true),
            Transport::Udp,
            &u,
        )
        .await;
        assert_eq!(m.response_code(), ResponseCode::NXDomain);
        assert!(!x.forwarded && x.learned.is_empty());
        assert_eq!(
            upstream.queried_names(),
            vec!["api.corral.test"],
            "pypi.org never went upstream"
        );
    }

    /// The control is the client's own message: its bytes hold the option
    /// data, the upstream's capture of corral's rebuilt query does not.
    #[tokio::test]
    async fn client_edns_data_never_reaches_the_upstream() {
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let addr = responder(
            ResponseCode::NoError,
            Some(a("api.corral.test.", [45, 0, 0, 1], 30)),
            Arc::clone(&seen),
        );
        let mut q = query("API.corral.TEST.", RecordType::A, true);
        if let Some(e) = q.extensions_mut() {
            e.options_mut()
                .insert(EdnsOption::Unknown(65001, b"exfiltrated data".to_vec()));
            e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
                IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2)),
                32,
                0,
            )));
        }
        let sent = bytes(&q);
        assert!(sent.windows(11).any(|w| w == b"exfiltrated"), "control");
        let (m, _) = resolve(&policy(), &q, Transport::Udp, &up(addr)).await;
        assert_eq!(m.response_code(), ResponseCode::NoError);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        let upstream_query = &seen[0];
        assert!(!upstream_query.windows(11).any(|w| w == b"exfiltrated"));
        assert!(
            !upstream_query.windows(4).any(|w| w == [10, 9, 0, 2]),
            "client subnet"
        );
        let parsed = Message::from_vec(upstream_query).unwrap();
        assert_ne!(parsed.id(), 0x1234, "the client's id stays with the client");
        assert_eq!(parsed.queries()[0].name().to_ascii(), "api.corral.test.");
        assert!(
            parsed
                .extensions()
                .as_ref()
                .unwrap()
                .options()
                .as_ref()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_flood_is_fetched_over_tcp_and_cut_to_the_cap() {
        let upstream = TestUpstream::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let flood: Vec<IpAddr> = (0..2_500u32)
            .map(|i| {
                IpAddr::V6(Ipv6Addr::from(
                    u128::from(Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0)) + u128::from(i),
                ))
            })
            .collect();
        upstream.set("x.cdn.corral.test", &flood, 30);
        let u = up(upstream.addr());
        let p = policy();
        let (m, x) = resolve(
            &p,
            &query("x.cdn.corral.test.", RecordType::AAAA, true),
            Transport::Udp,
            &u,
        )
        .await;
        assert!(!m.truncated());
        assert_eq!(addrs(&m).len(), DEFAULT_ANSWER_CAP);
        assert_eq!(x.learned.len(), DEFAULT_ANSWER_CAP);
        // Over TCP: one 64 KiB message carries about 2,340 of the 2,500
        // AAAA records (a datagram of the upstream's at most about 145).
        assert!(
            x.cut > 2_000,
            "only {} cut: the answer came over UDP",
            x.cut
        );
        // Without EDNS the same answer does not fit 512 bytes: truncated,
        // nothing handed out, so nothing learned; over TCP it goes whole.
        let q = query("x.cdn.corral.test.", RecordType::AAAA, false);
        let (m, x) = resolve(&p, &q, Transport::Udp, &u).await;
        assert!(m.truncated() && m.answers().is_empty() && x.learned.is_empty());
        let (m, x) = resolve(&p, &q, Transport::Tcp, &u).await;
        assert_eq!(
            (addrs(&m).len(), x.learned.len()),
            (DEFAULT_ANSWER_CAP, DEFAULT_ANSWER_CAP)
        );
    }

    #[tokio::test]
    async fn a_silent_upstream_is_servfail_with_the_reason() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let u = Upstreams::new(
            vec![silent.local_addr().unwrap()],
            Duration::from_millis(200),
        )
        .unwrap();
        let (m, x) = resolve(
            &policy(),
            &query("api.corral.test.", RecordType::A, true),
            Transport::Udp,
            &u,
        )
        .await;
        assert_eq!(m.response_code(), ResponseCode::ServFail);
        assert!(x.forwarded);
        let e = extended_errors(&m);
        assert!(e[0].text.contains("no answer within"), "{e:?}");
    }

    /// A dead first upstream (silent), then one that refuses: the third
    /// answers, and is asked first from then on, so the dead one costs one
    /// timeout, not one per query. The control: each upstream alone.
    #[tokio::test]
    async fn the_next_upstream_answers_when_one_is_silent_or_refuses() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let refusing_addr = responder(ResponseCode::Refused, None, Arc::default());
        let good = TestUpstream::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        good.set(
            "api.corral.test",
            &[IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1))],
            30,
        );
        let t = Duration::from_millis(300);
        let q = query("api.corral.test.", RecordType::A, true);
        let p = policy();
        for (alone, code, why) in [
            (
                silent.local_addr().unwrap(),
                ResponseCode::ServFail,
                "no answer within",
            ),
            (
                refusing_addr,
                ResponseCode::ServFail,
                "answered Query Refused",
            ),
            (good.addr(), ResponseCode::NoError, ""),
        ] {
            let u = Upstreams::new(vec![alone], t).unwrap();
            let (m, _) = resolve(&p, &q, Transport::Udp, &u).await;
            assert_eq!(m.response_code(), code, "control: {alone} alone");
            let text: Vec<String> = extended_errors(&m).into_iter().map(|e| e.text).collect();
            assert!(text.concat().contains(why), "{text:?}");
        }
        // What reached the silent one: datagrams waiting on its socket.
        silent.set_nonblocking(true).unwrap();
        let waiting = || {
            let mut buf = [0u8; 4096];
            std::iter::from_fn(|| silent.recv(&mut buf).ok()).count()
        };
        assert_eq!(waiting(), 1, "the control's query");
        let u = Upstreams::new(
            vec![silent.local_addr().unwrap(), refusing_addr, good.addr()],
            t,
        )
        .unwrap();
        let (m, x) = resolve(&p, &q, Transport::Udp, &u).await;
        assert_eq!(m.response_code(), ResponseCode::NoError);
        assert_eq!(addrs(&m), vec![IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1))]);
        assert_eq!(x.learned.len(), 1);
        assert_eq!(waiting(), 1, "the silent one was asked first");
        for _ in 0..3 {
            let (m, _) = resolve(&p, &q, Transport::Udp, &u).await;
            assert_eq!(m.response_code(), ResponseCode::NoError);
        }
        assert_eq!(waiting(), 0, "the one that answered is asked first");
        // None answers usably: the refusal is what the sandbox is told.
        let u = Upstreams::new(vec![silent.local_addr().unwrap(), refusing_addr], t).unwrap();
        let (m, _) = resolve(&p, &q, Transport::Udp, &u).await;
        assert_eq!(m.response_code(), ResponseCode::ServFail);
        assert!(
            extended_errors(&m)[0]
                .text
                .contains("answered Query Refused")
        );
        // All silent: SERVFAIL naming each.
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        let u = Upstreams::new(
            vec![silent.local_addr().unwrap(), other.local_addr().unwrap()],
            t,
        )
        .unwrap();
        let (m, _) = resolve(&p, &q, Transport::Udp, &u).await;
        assert_eq!(m.response_code(), ResponseCode::ServFail);
        let text = &extended_errors(&m)[0].text;
        assert!(
            text.contains(&silent.local_addr().unwrap().to_string())
                && text.contains(&other.local_addr().unwrap().to_string()),
            "{text}"
        );
        assert!(Upstreams::new(Vec::new(), t).is_none());
    }

    #[tokio::test]
    async fn garbage_and_responses_get_no_answer() {
        let u = up("127.0.0.1:9".parse().unwrap());
        assert_eq!(
            policy()
                .resolve(b"\x01\x02", Transport::Udp, &u)
                .await
                .response,
            None
        );
        let mut q = query("api.corral.test.", RecordType::A, true);
        q.set_message_type(MessageType::Response);
        assert_eq!(
            policy()
                .resolve(&bytes(&q), Transport::Udp, &u)
                .await
                .response,
            None
        );
    }
}

/// An internet profile's policy forwards any name (rebuilt, as on an
/// allowlist profile), follows any alias, and still refuses answers into
/// corral's reserved ranges and the host's networks.
#[test]
fn an_internet_profile_forwards_any_name_and_still_refuses_reserved_answers() {
    let prof = corral_egress::plan::test_support::profile(
        "web",
        "cb-web",
        "10.9.4.0/24",
        EgressMode::Internet,
        &[],
    );
    let p = Policy::for_profile(&prof, &["192.0.2.0/24".parse().unwrap()]);
    for n in ["pypi.org.", "anything.example.", "x.y.z.test."] {
        let q = query(n, RecordType::A, true);
        let up = forwarded(&p, &q);
        assert!(
            up.extensions()
                .as_ref()
                .is_none_or(|e| e.options().as_ref().is_empty())
        );
    }
    let q = query("www.example.", RecordType::A, false);
    let up = upstream(vec![
        cname("www.example.", "edge.elsewhere.example."),
        a("edge.elsewhere.example.", [45, 0, 0, 1], 30),
        a("edge.elsewhere.example.", [10, 0, 0, 1], 30),
        a("edge.elsewhere.example.", [192, 0, 2, 7], 30),
    ]);
    let out = p.answer(&q, &up);
    assert_eq!(out.response.response_code(), ResponseCode::NoError);
    assert_eq!(
        addrs(&out.response),
        vec![IpAddr::V4(Ipv4Addr::new(45, 0, 0, 1))]
    );
    assert_eq!(out.refused, 2);
    // Other types are still not forwarded.
    let txt = query("www.example.", RecordType::TXT, false);
    assert!(!matches!(p.decide(&txt, 1), Decision::Forward(_)));
}
