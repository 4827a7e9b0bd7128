//! Class 8 (docs/security.md): from Multipass's control bridge the host
//! answers only established traffic and DHCP. Its services — a DNS
//! forwarder on the bridge address (Multipass runs one there: a way out of
//! an allowlist), any other host service — are not reachable from a VM.
//! A "VM" namespace on a bridge named like Multipass's, each probe a
//! control first.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use corral_drill::lab::topology::HOST_SERVICE_PORT;
use corral_drill::lab::{Lab, Listeners, Observed, Probe, Transport, probe_from};
use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_egress::plan::DEFAULT_MULTIPASS_BRIDGE;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use nft_support::PROBE_TIMEOUT;

const MP_HOST: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const MP_VM: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 10);

#[test]
fn class8_the_multipass_bridge_reaches_no_host_service() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    let vm = Netns::new().unwrap();
    lab.topo
        .host
        .run_async(|| async {
            let links = Links::connect().unwrap();
            // Multipass's own bridge: not corral's, so without its stamp.
            let msg = rtnetlink::LinkBridge::new(DEFAULT_MULTIPASS_BRIDGE).build();
            links.handle().link().add(msg).execute().await.unwrap();
            links
                .add_address(
                    DEFAULT_MULTIPASS_BRIDGE,
                    format!("{MP_HOST}/24").parse().unwrap(),
                )
                .await
                .unwrap();
            links.set_up(DEFAULT_MULTIPASS_BRIDGE).await.unwrap();
            links
                .create_veth("mpvm0", "eth0", Some(vm.fd()))
                .await
                .unwrap();
            links
                .attach_port("mpvm0", DEFAULT_MULTIPASS_BRIDGE, false)
                .await
                .unwrap();
            links.set_up("mpvm0").await.unwrap();
        })
        .unwrap();
    vm.run_async(|| async {
        let links = Links::connect().unwrap();
        links
            .add_address("eth0", format!("{MP_VM}/24").parse().unwrap())
            .await
            .unwrap();
        links.set_up("eth0").await.unwrap();
    })
    .unwrap();
    // Multipass's DNS forwarder stands here as a UDP echo on the bridge.
    let host_services = Listeners::start(&lab.topo.host).unwrap();
    host_services
        .add(SocketAddr::new(IpAddr::V4(MP_HOST), 53), Transport::Udp)
        .unwrap();
    let probes = [
        Probe::Udp {
            to: SocketAddr::new(IpAddr::V4(MP_HOST), 53),
        },
        Probe::Tcp {
            to: SocketAddr::new(IpAddr::V4(MP_HOST), HOST_SERVICE_PORT),
        },
    ];
    // A fresh port needs a moment: the control retries for a few seconds.
    for p in &probes {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = probe_from(&vm, p, PROBE_TIMEOUT);
            if r.observed == Observed::Connected {
                break;
            }
            assert!(Instant::now() < deadline, "control {p}: {r:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    lab.apply().unwrap();
    for p in &probes {
        let r = probe_from(&vm, p, PROBE_TIMEOUT);
        assert!(r.observed.blocked(), "{p} from the Multipass bridge: {r:?}");
    }
}
