//! The drill's DNS probes: the gateway resolver of every profile, run for
//! real (one dnsmasq per bridge inside the simulated host, a test upstream
//! in the "internet" namespace whose query log shows what left the host).
//!
//! Per profile with a gateway resolver:
//! - `allowlist`: an address the upstream now gives for an allowlisted name
//!   (a CDN rotation after apply) is blocked before the sandbox looks the name
//!   up, the gateway resolves it, and it is reachable afterwards without a
//!   re-apply; an unlisted name gets NXDOMAIN and never reaches the upstream;
//!   a tunnel (many random labels under an unlisted domain) never reaches it.
//! - `internet`: the gateway forwards any name.
//! - `none` / `dns = "off"`: there is no resolver on the gateway.
//!
//! Controls run after apply from the simulated host itself (which corral
//! does not filter): the address answers, the upstream answers the name.
//! A blocked or NXDOMAIN result is thus the rules' or the filter's doing.

mod approval;
mod edns;
mod names;
pub(crate) use edns::EDNS_STRIPPED;
pub(crate) use names::allowed_name_entry;
use names::{ask, host_octet, nxdomain_kept, resolved_to, unlisted_name};

use super::report::{DrillRow, Expect, judge};
use crate::lab::LabGateways;
use crate::lab::gateways::UPSTREAM;
use crate::lab::topology::SandboxNs;
use crate::lab::{Lab, Observed, Probe, Transport, probe_from};
use corral_gateway::NameRules;
use corral_gateway::test_upstream::TestUpstream;
use corral_gateway::wire::{RCODE_NXDOMAIN, RCODE_REFUSED, TYPE_A, TYPE_TXT};
use corral_sandbox_core::{DnsPolicy, EgressMode, Profile};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The first three octets of the addresses the upstream answers for
/// names a sandbox then connects to: 192.175.48.0/24 (AS112, RFC 7534) is
/// public space that neither dnsmasq's `stop-dns-rebind` (it strips
/// private and documentation ranges) nor corral's reserved list covers.
/// It exists only inside the drill's "internet" namespace.
const ANSWERS: [u8; 3] = [192, 175, 48];

/// The address the upstream answers for profile `pi`'s listed name.
fn answer_for(pi: usize) -> IpAddr {
    answer_at(host_octet(pi))
}

/// `ANSWERS` with host octet `octet`.
fn answer_at(octet: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(ANSWERS[0], ANSWERS[1], ANSWERS[2], octet))
}

/// Random-label queries of the tunnel probe.
const TUNNEL_QUERIES: usize = 50;

/// The probe labels of the DNS rows.
#[cfg(test)]
pub(crate) const PROBES: [&str; 14] = [
    approval::APPROVED,
    ROTATED_BLOCKED,
    NAME_RESOLVED,
    ROTATED_REACHABLE,
    PINNED,
    crate::carry::CARRIED,
    crate::slaac::V6_ONLY_ALLOWLIST,
    UNLISTED,
    TUNNEL,
    FORWARDS,
    NO_RESOLVER,
    LEARNED_OTHER_PORT,
    REBINDING,
    EDNS_STRIPPED,
];

const ROTATED_BLOCKED: &str = "address rotated after apply blocked before lookup";

const NAME_RESOLVED: &str = "allowlisted name resolved by the gateway";

const ROTATED_REACHABLE: &str = "rotated address reachable after lookup, no re-apply";

const PINNED: &str =
    "learned address pinned to the sandbox that resolved it: a sibling is blocked until it asks";

const UNLISTED: &str = "unlisted name NXDOMAIN, never forwarded";

const TUNNEL: &str = "DNS tunnel (random labels) never reaches the upstream";

const FORWARDS: &str = "gateway forwards any name to the upstreams";

const NO_RESOLVER: &str = "no resolver on the gateway";

const LEARNED_OTHER_PORT: &str =
    "attack 4 (one learned set per class): resolved address on an unlisted port blocked";

const REBINDING: &str =
    "attack 5 (rebinding, reserved ranges): name answering 100.64.0.10 not handed out or blocked";

/// Runs the DNS probes against `lab` (rules already applied) with its
/// `gateways` (one dnsmasq per bridge) running: per profile, what its kind
/// of DNS promises. The gateway capacity attacks (class 5) run after these,
/// alongside the L2 attacks (see the crate's `run`).
pub(crate) fn profile_rows(lab: &Lab, gateways: &LabGateways, timeout: Duration) -> Vec<DrillRow> {
    let upstream = &gateways.upstream;
    let mut out = Vec::new();
    for (pi, p) in lab.profiles.iter().enumerate() {
        let Some(sb) = dns_sandbox(lab, p.name.as_str()) else {
            continue;
        };
        let d = Drill {
            lab,
            upstream,
            state: gateways.state_dir(),
            sb,
            timeout,
        };
        match (p.dns, p.mode) {
            (DnsPolicy::Off, _) | (_, EgressMode::None) => out.push(d.no_resolver()),
            (_, EgressMode::Internet) => {
                out.push(d.forwards(pi));
                // corral's resolver rebuilds every query on internet
                // profiles too; dnsmasq passes EDNS options on.
                if p.dns == DnsPolicy::Corral {
                    out.push(d.edns_stripped(&format!("edns{pi}.corral-drill.test"), pi));
                }
            }
            // Either resolver: the same rows hold for dnsmasq and corral's.
            (_, EgressMode::Allowlist) => out.extend(d.filtered(p, pi)),
        }
    }
    out
}

/// The sandbox a profile's DNS rows run from (its first).
pub(crate) fn dns_sandbox<'a>(lab: &'a Lab, profile: &str) -> Option<&'a SandboxNs> {
    lab.topo.sandboxes.iter().find(|s| s.profile == profile)
}

struct Drill<'a> {
    lab: &'a Lab,
    upstream: &'a TestUpstream,
    /// The gateways' state directory (held lookups are decided there).
    state: &'a std::path::Path,
    sb: &'a SandboxNs,
    timeout: Duration,
}

impl Drill<'_> {
    fn gateway(&self) -> SocketAddr {
        SocketAddr::new(self.sb.gateway_v4.into(), 53)
    }

    /// The upstream answers `name` when asked straight from the host.
    fn upstream_control(&self, name: &str) -> Observed {
        let up = SocketAddr::new(UPSTREAM.into(), 53);
        match ask(&self.lab.topo.host, up, name, TYPE_A, self.timeout).0 {
            Ok(_) => Observed::Connected,
            Err(e) => e,
        }
    }

    fn row(
        &self,
        probe: &str,
        to: String,
        expected: Expect,
        control: Observed,
        observed: Observed,
        ms: u64,
    ) -> DrillRow {
        DrillRow {
            probe: probe.to_owned(),
            from: self.sb.name.clone(),
            to,
            expected,
            verdict: judge(expected, &control, &observed),
            observed,
            control,
            ms,
            packet: None,
        }
    }

    fn no_unlisted_name(&self, probe: &str) -> DrillRow {
        let why = Observed::Error("the profile's wildcards admit every drill domain".to_owned());
        self.row(probe, "-".to_owned(), Expect::Block, why.clone(), why, 0)
    }

    fn no_resolver(&self) -> DrillRow {
        let name = "www.corral-drill.test";
        self.upstream
            .set(name, &[IpAddr::V4(Ipv4Addr::new(198, 18, 9, 1))], 60);
        let control = self.upstream_control(name);
        let (r, ms) = ask(&self.sb.ns, self.gateway(), name, TYPE_A, self.timeout);
        // An answer means a resolver is there; a timeout or refusal is the goal.
        let observed = r.map_or_else(|e| e, |_| Observed::Connected);
        self.row(
            NO_RESOLVER,
            format!("udp {} {name}", self.gateway()),
            Expect::Block,
            control,
            observed,
            ms,
        )
    }

    fn forwards(&self, pi: usize) -> DrillRow {
        let name = format!("www{pi}.corral-drill.test");
        // Outside corral's reserved ranges: corral's resolver refuses an
        // answer into them, on internet profiles too.
        let want = answer_for(pi);
        self.upstream.set(&name, &[want], 60);
        let control = self.upstream_control(&name);
        let (r, ms) = ask(&self.sb.ns, self.gateway(), &name, TYPE_A, self.timeout);
        let observed = r.map_or_else(|e| e, |resp| resolved_to(&resp, want));
        self.row(
            FORWARDS,
            format!("udp {} {name}", self.gateway()),
            Expect::Reach,
            control,
            observed,
            ms,
        )
    }

    fn filtered(&self, p: &Profile, pi: usize) -> Vec<DrillRow> {
        let mut out = Vec::new();
        let rules = NameRules::from_allow(&p.allow);
        if let Some((name, port, transport, outside)) = allowed_name_entry(p) {
            out.extend(self.rotation(&name, port, transport, pi));
            // dnsmasq's nftset opens an address to the whole profile.
            if p.dns == DnsPolicy::Corral {
                out.extend(self.pinned(p, &name, port, transport, pi));
            }
            out.push(self.carried(p, port, transport, pi));
            if let Some(other) = outside {
                out.push(self.other_port(&name, other, pi));
            }
            out.push(self.rebinding(&name, port, transport));
        }
        // With approvals an unlisted name is held, not refused: what
        // holds either way is that it never reaches the upstream.
        let held = p.approvals != corral_sandbox_core::Approvals::Off;
        out.push(self.unlisted(&rules, pi, held));
        out.push(self.tunnel(&rules, pi, held));
        if held {
            out.push(self.approved(p, &rules, pi));
        }
        if let Some((name, ..)) = allowed_name_entry(p)
            && p.dns == DnsPolicy::Corral
        {
            out.push(self.edns_stripped(&name, pi));
        }
        if crate::slaac::applies(p) {
            out.push(self.v6_only_allowlist(p));
        }
        out
    }

    /// The approval row (`approval`), for a name the profile does not
    /// list, from the profile's second sandbox when it has one (the
    /// first's tunnel lookups may still wait for the operator, as many as
    /// one sandbox may have held).
    fn approved(&self, p: &Profile, rules: &NameRules, pi: usize) -> DrillRow {
        let Some(name) = unlisted_name(rules, &format!("held{pi}")) else {
            return self.no_unlisted_name(approval::APPROVED);
        };
        let sb = self
            .lab
            .topo
            .sandboxes_of(p.name.as_str())
            .nth(1)
            .unwrap_or(self.sb);
        let to = approval::address(pi);
        self.upstream.set(&name, &[to], 60);
        let (probe, control, observed, ms) =
            approval::run(self.lab, self.state, sb, &name, to, self.timeout);
        let mut row = self.row(
            approval::APPROVED,
            format!("{probe} ({name})"),
            Expect::Reach,
            control,
            observed,
            ms,
        );
        row.from = sb.name.clone();
        row
    }

    /// The IPv6 addressing row (`crate::slaac`), from the profile's second
    /// sandbox when it has one (the first runs the other rows).
    fn v6_only_allowlist(&self, p: &Profile) -> DrillRow {
        let sb = self
            .lab
            .topo
            .sandboxes_of(p.name.as_str())
            .nth(1)
            .unwrap_or(self.sb);
        let (to, control, observed, ms) = crate::slaac::run(self.lab, p, sb, self.timeout);
        let mut row = self.row(
            crate::slaac::V6_ONLY_ALLOWLIST,
            to,
            Expect::Reach,
            control,
            observed,
            ms,
        );
        row.from = sb.name.clone();
        row
    }

    /// A rotation after apply: blocked before the lookup, resolved by the
    /// gateway, reachable after it.
    fn rotation(&self, name: &str, port: u16, t: Transport, pi: usize) -> Vec<DrillRow> {
        let fresh = answer_for(pi);
        if let Err(e) = self.lab.topo.add_internet_listener(fresh, port, t) {
            return vec![self.row(
                "rotated address listener",
                fresh.to_string(),
                Expect::Reach,
                Observed::Error(e.to_string()),
                Observed::Error(e.to_string()),
                0,
            )];
        }
        self.upstream.set(name, &[fresh], 3600);
        let probe = Probe::l4(t, SocketAddr::new(fresh, port));
        let control = probe_from(&self.lab.topo.host, &probe, self.timeout).observed;
        let before = probe_from(&self.sb.ns, &probe, self.timeout);
        let name_control = self.upstream_control(name);
        let (r, ms) = ask(&self.sb.ns, self.gateway(), name, TYPE_A, self.timeout);
        let resolved = r.map_or_else(|e| e, |resp| resolved_to(&resp, fresh));
        let after = probe_from(&self.sb.ns, &probe, self.timeout);
        vec![
            self.row(
                ROTATED_BLOCKED,
                probe.to_string(),
                Expect::Block,
                control.clone(),
                before.observed,
                before.ms,
            ),
            self.row(
                NAME_RESOLVED,
                format!("udp {} {name}", self.gateway()),
                Expect::Reach,
                name_control,
                resolved,
                ms,
            ),
            self.row(
                ROTATED_REACHABLE,
                probe.to_string(),
                Expect::Reach,
                control,
                after.observed,
                after.ms,
            ),
        ]
    }

    /// The address the rotation row had the first sandbox learn, from the
    /// profile's second: blocked, since corral's resolver pinned it to the
    /// sandbox that asked. The control is the second sandbox's own lookup
    /// and connection afterwards: its path is open once the pin is its
    /// own, so the block was the pin's doing. `None` without a second
    /// sandbox.
    fn pinned(
        &self,
        p: &Profile,
        name: &str,
        port: u16,
        t: Transport,
        pi: usize,
    ) -> Option<DrillRow> {
        let sibling = self.lab.topo.sandboxes_of(p.name.as_str()).nth(1)?;
        let fresh = answer_for(pi);
        let probe = Probe::l4(t, SocketAddr::new(fresh, port));
        let before = probe_from(&sibling.ns, &probe, self.timeout);
        let gateway = SocketAddr::new(sibling.gateway_v4.into(), 53);
        let control = match ask(&sibling.ns, gateway, name, TYPE_A, self.timeout).0 {
            Ok(resp) => match resolved_to(&resp, fresh) {
                Observed::Connected => probe_from(&sibling.ns, &probe, self.timeout).observed,
                other => other,
            },
            Err(e) => e,
        };
        let mut row = self.row(
            PINNED,
            probe.to_string(),
            Expect::Block,
            control,
            before.observed,
            before.ms,
        );
        row.from = sibling.name.clone();
        Some(row)
    }

    /// The address the rotation row had the sandbox learn, reached again
    /// after an apply of an unrelated change without a new lookup
    /// (`crate::carry`).
    fn carried(&self, p: &Profile, port: u16, t: Transport, pi: usize) -> DrillRow {
        let fresh = answer_for(pi);
        let probe = Probe::l4(t, SocketAddr::new(fresh, port));
        let control = probe_from(&self.lab.topo.host, &probe, self.timeout).observed;
        let (observed, ms) =
            crate::carry::after_unrelated_apply(self.lab, p, self.sb, &probe, self.timeout);
        self.row(
            crate::carry::CARRIED,
            probe.to_string(),
            Expect::Reach,
            control,
            observed,
            ms,
        )
    }

    /// Attack 4: the address a name was just resolved to (see
    /// [`Drill::rotation`]), on a TCP port the name's entry does not list.
    fn other_port(&self, name: &str, other: u16, pi: usize) -> DrillRow {
        let fresh = answer_for(pi);
        let probe = Probe::Tcp {
            to: SocketAddr::new(fresh, other),
        };
        if let Err(e) = self
            .lab
            .topo
            .add_internet_listener(fresh, other, Transport::Tcp)
        {
            let e = Observed::Error(e.to_string());
            return self.row(
                LEARNED_OTHER_PORT,
                probe.to_string(),
                Expect::Block,
                e.clone(),
                e,
                0,
            );
        }
        let control = probe_from(&self.lab.topo.host, &probe, self.timeout).observed;
        // The name was resolved through the gateway a moment ago.
        let _ = ask(&self.sb.ns, self.gateway(), name, TYPE_A, self.timeout);
        let r = probe_from(&self.sb.ns, &probe, self.timeout);
        self.row(
            LEARNED_OTHER_PORT,
            probe.to_string(),
            Expect::Block,
            control,
            r.observed,
            r.ms,
        )
    }

    /// Attack 5: the name's authority now answers a shared-space address
    /// (which dnsmasq's rebind protection lets through); after the sandbox
    /// resolves it, the address stays unreachable.
    fn rebinding(&self, name: &str, port: u16, t: Transport) -> DrillRow {
        let shared = IpAddr::V4(Ipv4Addr::new(100, 64, 0, 10));
        let probe = Probe::l4(t, SocketAddr::new(shared, port));
        if let Err(e) = self.lab.topo.add_internet_listener(shared, port, t) {
            let e = Observed::Error(e.to_string());
            return self.row(REBINDING, probe.to_string(), Expect::Block, e.clone(), e, 0);
        }
        let control = probe_from(&self.lab.topo.host, &probe, self.timeout).observed;
        self.upstream.set(name, &[shared], 60);
        let (r, ms) = ask(&self.sb.ns, self.gateway(), name, TYPE_A, self.timeout);
        match r {
            // Handed out: the address must stay unreachable all the same.
            Ok(resp) if resolved_to(&resp, shared) == Observed::Connected => {
                let after = probe_from(&self.sb.ns, &probe, self.timeout);
                self.row(
                    REBINDING,
                    probe.to_string(),
                    Expect::Block,
                    control,
                    after.observed,
                    after.ms,
                )
            }
            // An answer the gateway refuses to hand out (a reserved
            // address: `bogus-nxdomain`) is blocked at the lookup; the
            // control is the host reaching the address.
            Ok(resp) => {
                let refused = resolved_to(&resp, shared);
                self.row(
                    REBINDING,
                    probe.to_string(),
                    Expect::Block,
                    control,
                    refused,
                    ms,
                )
            }
            // No answer at all: nothing was tested.
            Err(e) => self.row(
                REBINDING,
                probe.to_string(),
                Expect::Block,
                e.clone(),
                e,
                ms,
            ),
        }
    }

    fn unlisted(&self, rules: &NameRules, pi: usize, held: bool) -> DrillRow {
        let Some(name) = unlisted_name(rules, &format!("exfil{pi}")) else {
            return self.no_unlisted_name(UNLISTED);
        };
        self.upstream
            .set(&name, &[IpAddr::V4(Ipv4Addr::new(198, 18, 9, 2))], 60);
        let control = self.upstream_control(&name);
        let before = self.upstream.queries().len();
        let (r, ms) = ask(&self.sb.ns, self.gateway(), &name, TYPE_A, self.timeout);
        let leaked = self.upstream.queries()[before..]
            .iter()
            .any(|q| q.name == name);
        let observed = match r {
            _ if leaked => Observed::Connected,
            Ok(resp) => nxdomain_kept(&resp, leaked),
            // Waiting for the operator past the client's patience.
            Err(Observed::TimedOut) if held => {
                Observed::Rejected("held for the operator, not forwarded".to_owned())
            }
            Err(e) => e,
        };
        self.row(
            UNLISTED,
            format!("udp {} {name}", self.gateway()),
            Expect::Block,
            control,
            observed,
            ms,
        )
    }

    /// The EDNS row (`edns`), on a profile corral's resolver serves:
    /// dnsmasq passes a client's EDNS options on upstream (run against
    /// it, this row fails: the option's bytes reach the upstream).
    fn edns_stripped(&self, name: &str, pi: usize) -> DrillRow {
        let fresh = answer_for(pi);
        self.upstream.set(name, &[fresh], 3600);
        let data = format!("corral-drill-edns-{pi}-exfiltrated");
        let up = SocketAddr::new(UPSTREAM.into(), 53);
        let control = edns::control(
            &self.lab.topo.host,
            self.upstream,
            up,
            name,
            data.as_bytes(),
            self.timeout,
        );
        let c = edns::probe(
            &self.sb.ns,
            self.gateway(),
            self.upstream,
            name,
            data.as_bytes(),
            self.timeout,
        );
        self.row(
            EDNS_STRIPPED,
            format!("udp {} {name} +option {}", self.gateway(), data.len()),
            Expect::Block,
            control,
            c.observed,
            c.ms,
        )
    }

    fn tunnel(&self, rules: &NameRules, pi: usize, held: bool) -> DrillRow {
        let Some(domain) = unlisted_name(rules, &format!("c2-{pi}")) else {
            return self.no_unlisted_name(TUNNEL);
        };
        let control = self.upstream_control(&format!("control.{domain}"));
        let start = Instant::now();
        let before = self.upstream.queries().len();
        let (mut nx, mut waited) = (0, 0);
        let mut failure = None;
        let mut seed = 0x9e37_79b9_u32 ^ u32::try_from(pi).unwrap_or(0);
        for i in 0..TUNNEL_QUERIES {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let name = format!("{seed:08x}{i:03x}.{domain}");
            let qtype = if i % 2 == 0 { TYPE_A } else { TYPE_TXT };
            match ask(&self.sb.ns, self.gateway(), &name, qtype, self.timeout).0 {
                Ok(resp) if resp.rcode == RCODE_NXDOMAIN => nx += 1,
                // Held for the operator, or refused once the sandbox has
                // as many held as it may.
                Ok(resp) if held && resp.rcode == RCODE_REFUSED => waited += 1,
                Err(Observed::TimedOut) if held => waited += 1,
                Ok(resp) => failure = Some(format!("{name}: rcode {}", resp.rcode)),
                Err(e) => failure = Some(format!("{name}: {e:?}")),
            }
        }
        let forwarded = self.upstream.queries()[before..]
            .iter()
            .filter(|q| q.name.ends_with(&domain))
            .count();
        let observed = match (forwarded, failure) {
            (0, None) if held => Observed::Rejected(format!(
                "{nx}/{TUNNEL_QUERIES} NXDOMAIN, {waited} held or refused for the operator, none forwarded"
            )),
            (0, None) => {
                Observed::Rejected(format!("{nx}/{TUNNEL_QUERIES} NXDOMAIN, none forwarded"))
            }
            (0, Some(f)) => Observed::Error(f),
            (n, _) => {
                tracing::warn!(forwarded = n, "drill: tunnel queries reached the upstream");
                Observed::Connected
            }
        };
        let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.row(
            TUNNEL,
            format!("udp {} *.{domain} x{TUNNEL_QUERIES}", self.gateway()),
            Expect::Block,
            control,
            observed,
            ms,
        )
    }
}

/// The row saying the gateways could not be started (every DNS and
/// gateway row is then missing).
pub(crate) fn setup_error(e: String) -> DrillRow {
    DrillRow {
        probe: "gateway resolvers (DNS probes)".to_owned(),
        from: "drill".to_owned(),
        to: "dnsmasq per bridge, test upstream".to_owned(),
        expected: Expect::Reach,
        observed: Observed::Error(e.clone()),
        control: Observed::Error(e),
        verdict: super::report::Verdict::Error,
        ms: 0,
        packet: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report's DNS rows, each printed (a failure shows them all).
    fn dns_rows(report: &super::super::DrillReport) -> Vec<&DrillRow> {
        let dns: Vec<&DrillRow> = report
            .rows
            .iter()
            .filter(|r| PROBES.contains(&r.probe.as_str()))
            .collect();
        for r in &dns {
            eprintln!(
                "{:?} {} {} -> {:?} (control {:?}) {} ms",
                r.verdict, r.from, r.probe, r.observed, r.control, r.ms
            );
        }
        dns
    }

    /// The allowlist profile of the corral-resolver tests, with `extra`
    /// lines.
    fn corrals_allowlist(extra: &str) -> String {
        format!(
            r#"
[[profile]]
name = "dev"
bridge = "cb-dev"
subnet = "10.9.0.0/24"
subnet_v6 = "fd00:9::/64"
mode = "allowlist"
dns = "corral"
{extra}allow = ["api.example.com:443/tcp", "*.cdn.example.com", "[2001:db8:1::10]:443/tcp"]
"#
        )
    }

    /// The drill of the profiles in `text`: `dns` DNS rows, each passed,
    /// and every other row passed too.
    fn all_rows_pass(text: &str, dns: usize) {
        let cfg = corral_sandbox_core::config::Config::from_toml_str(text, "t").unwrap();
        let report =
            super::super::run(&cfg.profiles, &super::super::DrillOptions::default()).unwrap();
        let rows = dns_rows(&report);
        assert_eq!(rows.len(), dns, "{rows:#?}");
        assert!(
            rows.iter()
                .all(|r| r.verdict == super::super::Verdict::Pass),
            "{rows:#?}"
        );
        assert!(report.ok(), "{}", report.summary());
    }

    #[test]
    fn dns_rows_pass_for_every_kind_of_profile() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let text = r#"
[[profile]]
name = "dev"
bridge = "cb-dev"
subnet = "10.9.0.0/24"
subnet_v6 = "fd00:9::/64"
mode = "allowlist"
allow = ["api.example.com:443/tcp", "*.cdn.example.com", "[2001:db8:1::10]:443/tcp"]

[[profile]]
name = "web"
bridge = "cb-web"
subnet = "10.9.1.0/24"
mode = "internet"

[[profile]]
name = "off"
bridge = "cb-off"
subnet = "10.9.2.0/24"
mode = "none"
"#;
        let cfg = corral_sandbox_core::config::Config::from_toml_str(text, "t").unwrap();
        let report =
            super::super::run(&cfg.profiles, &super::super::DrillOptions::default()).unwrap();
        let dns = dns_rows(&report);
        // dev: rotation (3 rows), carried over an apply, attack 4 (other
        // port), attack 5 (rebinding), unlisted, tunnel, IPv6 addressing;
        // web: forwards; off: no resolver.
        assert_eq!(dns.len(), 11, "{dns:#?}");
        assert!(
            dns.iter().all(|r| r.verdict == super::super::Verdict::Pass),
            "{dns:#?}"
        );
        // dev lists names: the learned-set bound (class 4) runs on it, A and
        // AAAA, each with its control (and passed: `report.ok()` below).
        let rows4: Vec<&DrillRow> = report
            .rows
            .iter()
            .filter(|r| r.probe.starts_with(crate::attack::learned_flood::PREFIX))
            .collect();
        for r in &rows4 {
            eprintln!(
                "{:?} {} -> {:?} (control {:?}) {} ms",
                r.verdict, r.probe, r.observed, r.control, r.ms
            );
        }
        assert_eq!(rows4.len(), 2, "{rows4:#?}");
        assert!(report.ok(), "{}", report.summary());
    }

    /// An internet profile served by corral's own gateway (`dns =
    /// "corral"`: any name forwarded, every query and answer rebuilt, no
    /// learned sets; leases and adverts corral's too): its forwarding row
    /// and the EDNS row pass, and so does the rest of its drill.
    #[test]
    fn internet_rows_pass_with_corrals_gateway() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let text = r#"
[[profile]]
name = "web"
bridge = "cb-web"
subnet = "10.9.4.0/24"
subnet_v6 = "fd00:94::/64"
mode = "internet"
dns = "corral"
"#;
        all_rows_pass(text, 2);
    }

    /// A `none` profile on corral's gateway (`dns = "corral"`: its DHCP
    /// server and advertisements, no resolver, no dnsmasq): the
    /// no-resolver row passes, and so does the rest of its drill (the
    /// DHCP attack rows against corral's server included).
    #[test]
    fn none_rows_pass_with_corrals_gateway() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let text = r#"
[[profile]]
name = "off"
bridge = "cb-off"
subnet = "10.9.5.0/24"
subnet_v6 = "fd00:95::/64"
mode = "none"
dns = "corral"
"#;
        all_rows_pass(text, 1);
    }

    /// The filtered rows, with corral's own resolver serving the profile
    /// (`dns = "corral"`; the lab hosts it as corrald does, from the
    /// record the gateways' start wrote, and dnsmasq serves the leases
    /// only): every row that holds for dnsmasq holds for it.
    #[test]
    fn dns_rows_pass_with_corrals_resolver() {
        if !corral_test_support::gate::netns() {
            return;
        }
        // rotation (3 rows), pinned to the sandbox that asked, carried
        // over an apply, attack 4 (other port), attack 5 (rebinding),
        // unlisted, tunnel, EDNS data, IPv6 addressing.
        all_rows_pass(&corrals_allowlist(""), 11);
    }

    /// The same profile with `approvals = "ask"`: a name it does not list
    /// is held, approved by the drill as the operator would, and reached.
    /// Every other row of the profile passes as without approvals.
    #[test]
    fn the_approval_row_passes_and_the_rest_as_before() {
        if !corral_test_support::gate::netns() {
            return;
        }
        // dns_rows_pass_with_corrals_resolver's eleven and the approval.
        all_rows_pass(&corrals_allowlist("approvals = \"ask\"\n"), 12);
    }
}
