//! `[host]`, `[host.verification]` and `[host.watch]`: from raw strings to typed settings,
//! recording every problem with its position.

use core::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::errors::Collector;
use super::raw::{RawHost, RawVerification, RawWatch};
use super::{HostConfig, VerificationConfig, WatchConfig, WatchReaction, defaults};
use crate::names::{BridgeName, HostName, InterfaceName};
use crate::platform::{EgressClass, SandboxKind, egress_class};
use crate::verify::VerificationOptions;

const HOST: &str = "host";
const VERIFY: &str = "host.verification";
const WATCH: &str = "host.watch";

fn start<T>(s: &Spanned<T>) -> Option<usize> {
    Some(s.span().start)
}

/// A refused character named in words: a space or a tab printed as itself
/// would leave a blank where the value should be.
fn refused_char(ch: char) -> String {
    match ch {
        ' ' => "a space".to_owned(),
        '#' => "`#`".to_owned(),
        c if c.is_whitespace() && !c.is_control() => "a whitespace character".to_owned(),
        c => format!("the control character `{}`", c.escape_debug()),
    }
}

/// Convert `[host]`; a part that is invalid is recorded in `c` and keeps
/// its default, so the rest can still be checked against it.
pub(crate) fn convert(
    raw: RawHost,
    raw_verification: Option<RawVerification>,
    raw_watch: Option<RawWatch>,
    c: &mut Collector<'_>,
) -> HostConfig {
    let mut host = defaults::host();
    if let Some(dir) = &raw.state_dir {
        let bad = dir
            .get_ref()
            .chars()
            .find(|ch| ch.is_control() || ch.is_whitespace() || *ch == '#');
        if let Some(ch) = bad {
            // The path reaches generated files and daemons' command lines.
            c.at(
                start(dir),
                Some(HOST),
                Some("state_dir"),
                format!(
                    "the path holds {} (U+{:04X}), which corral refuses in a path it hands to \
                     dnsmasq; use a path without whitespace, control characters or `#`",
                    refused_char(ch),
                    u32::from(ch)
                ),
            );
        } else if dir.get_ref().starts_with('/') {
            host.state_dir = PathBuf::from(dir.get_ref());
        } else {
            c.at(
                start(dir),
                Some(HOST),
                Some("state_dir"),
                format!(
                    "`{}` is not an absolute path; write it from the root, e.g. {}",
                    dir.get_ref(),
                    defaults::DEFAULT_STATE_DIR
                ),
            );
        }
    }
    if let Some(uplink) = &raw.uplink {
        match InterfaceName::new(uplink.get_ref()) {
            Ok(name) => host.uplink = Some(name),
            Err(e) => c.at(start(uplink), Some(HOST), Some("uplink"), e.to_string()),
        }
    }
    if let Some(bridge) = &raw.multipass_bridge {
        match BridgeName::new(bridge.get_ref()) {
            Ok(name) => host.multipass_bridge = name,
            Err(e) => c.at(
                start(bridge),
                Some(HOST),
                Some("multipass_bridge"),
                e.to_string(),
            ),
        }
    }
    for ip in &raw.dns_upstreams {
        match ip.get_ref().parse::<IpAddr>() {
            Ok(addr) if addr.is_unspecified() || addr.is_multicast() => c.at(
                start(ip),
                Some(HOST),
                Some("dns_upstreams"),
                format!("{addr} cannot be a resolver; give a unicast resolver address"),
            ),
            Ok(addr) => host.dns_upstreams.push(addr),
            Err(_) => c.at(
                start(ip),
                Some(HOST),
                Some("dns_upstreams"),
                format!(
                    "`{}` is not an IP address; list resolver addresses such as \
                        \"192.0.2.53\" (names cannot be resolved before a resolver is known)",
                    ip.get_ref()
                ),
            ),
        }
    }
    for kind in &raw.attested_executors {
        match kind.get_ref().parse::<SandboxKind>() {
            Ok(k) if !k.is_remote() => c.at(
                start(kind),
                Some(HOST),
                Some("attested_executors"),
                format!(
                    "{k} runs on this host, not on an executor; only incus-remote, \
                        multipass-remote and sprites can be attested"
                ),
            ),
            Ok(k) => push_unique(&mut host.attested_executors, k),
            Err(e) => c.at(start(kind), Some(HOST), Some("attested_executors"), e),
        }
    }
    host.deny = super::deny::parse_list(&raw.deny, Some(HOST), c);
    if let Some(v) = raw_verification {
        host.verification = verification(v, c);
    }
    if let Some(w) = raw_watch {
        host.watch = watch(&w, c);
    }
    host
}

fn watch(raw: &RawWatch, c: &mut Collector<'_>) -> WatchConfig {
    let mut out = WatchConfig::default();
    if let Some(r) = &raw.reaction {
        match r.get_ref().as_str() {
            "heal" => out.reaction = WatchReaction::Heal,
            "cut" => out.reaction = WatchReaction::Cut,
            other => c.at(
                start(r),
                Some(WATCH),
                Some("reaction"),
                format!("`{other}` is not a reaction; write \"heal\" (the default) or \"cut\""),
            ),
        }
    }
    if let Some(ms) = &raw.settle_ms {
        match *ms.get_ref() {
            v @ 1..=1000 => out.settle = Duration::from_millis(v),
            v => c.at(
                start(ms),
                Some(WATCH),
                Some("settle_ms"),
                format!(
                    "{v} ms is out of range; give 1 to 1000 (every burst of kernel events \
                    waits this long before the read-back)"
                ),
            ),
        }
    }
    if let Some(secs) = &raw.interval_secs {
        match *secs.get_ref() {
            v @ 1..=3600 => out.interval = Duration::from_secs(v),
            v => c.at(
                start(secs),
                Some(WATCH),
                Some("interval_secs"),
                format!("{v} s is out of range; give 1 to 3600"),
            ),
        }
    }
    out
}

fn push_unique(list: &mut Vec<SandboxKind>, kind: SandboxKind) {
    if !list.contains(&kind) {
        list.push(kind);
    }
}

fn verification(raw: RawVerification, c: &mut Collector<'_>) -> VerificationConfig {
    let mut out = VerificationConfig::default();
    for kind in &raw.kinds {
        match kind.get_ref().parse::<SandboxKind>() {
            Ok(k) if egress_class(k) != EgressClass::ProviderHost => c.at(
                start(kind),
                Some(VERIFY),
                Some("kinds"),
                format!(
                    "{k} has no provider-host filter to verify; only tart can be opted in to \
                        per-sandbox verification"
                ),
            ),
            Ok(k) => push_unique(&mut out.kinds, k),
            Err(e) => c.at(start(kind), Some(VERIFY), Some("kinds"), e),
        }
    }
    if let Some(s) = &raw.canary {
        match s.get_ref().parse::<SocketAddr>() {
            Ok(addr) => match not_public(addr.ip()) {
                Some(why) => c.at(
                    start(s),
                    Some(VERIFY),
                    Some("canary"),
                    format!(
                        "{} is {why}: it would fail even without a filter, so it proves nothing; \
                        use a public address you control",
                        addr.ip()
                    ),
                ),
                None if addr.port() == 0 => c.at(
                    start(s),
                    Some(VERIFY),
                    Some("canary"),
                    "port 0 cannot be connected to; use the port the canary listens on",
                ),
                None => out.canary = Some(addr),
            },
            Err(_) => c.at(
                start(s),
                Some(VERIFY),
                Some("canary"),
                format!(
                    "`{}` is not an address and port; write \"198.51.100.7:443\" or \
                    \"[2001:db8::7]:443\"",
                    s.get_ref()
                ),
            ),
        }
    }
    if let Some(s) = &raw.canary_v6 {
        match s.get_ref().parse::<SocketAddrV6>() {
            Ok(addr) => match not_public(IpAddr::V6(*addr.ip())) {
                Some(why) => c.at(
                    start(s),
                    Some(VERIFY),
                    Some("canary_v6"),
                    format!("{} is {why}; use a global IPv6 address", addr.ip()),
                ),
                None if addr.port() == 0 => c.at(
                    start(s),
                    Some(VERIFY),
                    Some("canary_v6"),
                    "port 0 cannot be connected to; use the port the canary listens on",
                ),
                None => out.canary_v6 = Some(addr),
            },
            Err(_) => c.at(
                start(s),
                Some(VERIFY),
                Some("canary_v6"),
                format!(
                    "`{}` is not an IPv6 address and port; write it as \"[2001:db8::7]:443\"",
                    s.get_ref()
                ),
            ),
        }
    }
    if let Some(s) = &raw.unlisted_name {
        match HostName::new(s.get_ref()) {
            Ok(h) => out.unlisted_name = Some(h),
            Err(e) => c.at(start(s), Some(VERIFY), Some("unlisted_name"), e.to_string()),
        }
    }
    let secs = |v: &Option<Spanned<u64>>, d: Duration| {
        v.as_ref().map_or(d, |s| Duration::from_secs(*s.get_ref()))
    };
    let defaults = VerificationOptions::default();
    out.options = VerificationOptions {
        check_timeout: secs(&raw.check_timeout_secs, defaults.check_timeout),
        cool_down: secs(&raw.cool_down_secs, defaults.cool_down),
        reverify_interval: secs(&raw.reverify_interval_secs, defaults.reverify_interval),
        max_probe_output: raw
            .max_probe_output_bytes
            .as_ref()
            .map_or(defaults.max_probe_output, |s| {
                usize::try_from(*s.get_ref()).unwrap_or(usize::MAX)
            }),
    };
    for e in out.options.check() {
        let span = match e.key {
            "check_timeout_secs" => raw.check_timeout_secs.as_ref().and_then(start),
            "cool_down_secs" => raw.cool_down_secs.as_ref().and_then(start),
            "reverify_interval_secs" => raw.reverify_interval_secs.as_ref().and_then(start),
            _ => raw.max_probe_output_bytes.as_ref().and_then(start),
        };
        c.at(span, Some(VERIFY), Some(e.key), e.problem);
    }
    if let Some(first) = raw.kinds.first() {
        for (key, missing) in [
            ("canary", raw.canary.is_none()),
            ("canary_v6", raw.canary_v6.is_none()),
            ("unlisted_name", raw.unlisted_name.is_none()),
        ] {
            if missing {
                c.at(
                    start(first),
                    Some(VERIFY),
                    Some(key),
                    format!(
                        "kinds opts in to verification, so `{key}` is required: the canary cannot \
                        run without it"
                    ),
                );
            }
        }
    }
    out
}

/// Why `ip` is not a public address (a canary there proves nothing).
pub(crate) fn not_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_unspecified() {
                Some("unspecified")
            } else if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_private() || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64) {
                Some("a private address")
            } else if v4.is_link_local() {
                Some("a link-local address")
            } else if v4.is_multicast() || v4.is_broadcast() || v4.octets()[0] >= 240 {
                Some("not a unicast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_loopback() {
                Some("a loopback address")
            } else if (first & 0xfe00) == 0xfc00 {
                Some("a unique-local address")
            } else if (first & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("not a unicast address")
            } else if v6.to_ipv4_mapped().is_some() {
                Some("an IPv4-mapped address")
            } else {
                None
            }
        }
    }
}
