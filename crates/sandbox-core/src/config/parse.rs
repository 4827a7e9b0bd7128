//! `corral.toml` text → [`Config`]. Each section is deserialized on its own
//! so one bad section does not hide the problems of the others; every
//! semantic check then runs and all problems are returned together.

use ipnet::{Ipv4Net, Ipv6Net};
use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::errors::{Collector, ConfigErrors};
use super::raw::{RawHost, RawPhases, RawProfile, TOP_KEYS};
use super::{Config, HostConfig, PhaseProfiles, host};
use crate::names::{BridgeName, ProfileName};
use crate::profile::{
    AllowEntry, Approvals, BlockAction, DEFAULT_APPROVAL_TIMEOUT_SECS, DEFAULT_LEARNED_MAX,
    DnsPolicy, EgressMode, FlowLimits, MAX_APPROVAL_TIMEOUT_SECS, MAX_LEARNED_MAX, Profile,
    ProfileField, ProfileSet,
};

fn start<T>(s: &Spanned<T>) -> Option<usize> {
    Some(s.span().start)
}

pub(crate) fn from_toml_str(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    let mut c = Collector::new(file, text);
    let (doc, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        for e in syntax {
            c.at(
                e.span().map(|s| s.start),
                None,
                None,
                e.message().to_owned(),
            );
        }
        return Err(c.into_errors());
    }
    let mut raw_host = RawHost::default();
    let mut raw_profiles: Vec<Option<RawProfile>> = Vec::new();
    let mut raw_phases = None;
    let mut raw_verification = None;
    let mut raw_watch = None;
    for (key, value) in doc.into_inner() {
        match key.get_ref().as_ref() {
            "host" => {
                // `[host.verification]` is deserialized on its own so that its
                // errors name their section and do not hide `[host]`'s.
                let span = value.span();
                let mut table = value.into_inner();
                let (verification, watch) = match &mut table {
                    DeValue::Table(t) => (t.remove("verification"), t.remove("watch")),
                    _ => (None, None),
                };
                raw_host = de(Spanned::new(span, table), "host", &mut c).unwrap_or_default();
                raw_verification = verification.and_then(|v| de(v, "host.verification", &mut c));
                raw_watch = watch.and_then(|v| de(v, "host.watch", &mut c));
            }
            "phases" => raw_phases = de::<RawPhases>(value, "phases", &mut c),
            "profile" => {
                let span = value.span();
                match value.into_inner() {
                    DeValue::Array(items) => {
                        for (i, item) in items.into_iter().enumerate() {
                            let ctx = match item
                                .get_ref()
                                .get("name")
                                .and_then(|n| n.get_ref().as_str())
                            {
                                Some(name) => format!("profile \"{name}\""),
                                None => format!("profile #{}", i + 1),
                            };
                            raw_profiles.push(de(item, &ctx, &mut c));
                        }
                    }
                    other => c.at(
                        Some(span.start),
                        None,
                        Some("profile"),
                        format!(
                            "expected [[profile]] tables, found a {}; write each profile as a \
                                [[profile]] section",
                            other.type_str()
                        ),
                    ),
                }
            }
            other => c.at(
                start(&key),
                None,
                None,
                format!(
                    "unknown key `{other}`; valid top-level keys are {}",
                    TOP_KEYS.join(", ")
                ),
            ),
        }
    }
    // A bad `[host]` still checks the profiles against what it could read
    // (a bad field keeps its valid default), so one pass says everything.
    let host = host::convert(raw_host, raw_verification, raw_watch, &mut c);
    let profiles = profiles(&raw_profiles, &host, &mut c);
    let phases = raw_phases.map(|p| phases(&p, profiles.as_ref(), &mut c));
    match profiles {
        Some(profiles) => c.finish(|| Config {
            host,
            profiles,
            phases: phases.unwrap_or_default(),
        }),
        // A section that failed to convert recorded at least one error.
        None => Err(c.into_errors()),
    }
}

/// Deserialize one section, recording every key's problem, not only the
/// first one serde meets: a key that does not deserialize is recorded and
/// taken out, and the rest tried again, so one pass reports them all (and,
/// when only optional keys were bad, the rest is still checked).
fn de<T: DeserializeOwned>(
    value: Spanned<DeValue<'_>>,
    ctx: &str,
    c: &mut Collector<'_>,
) -> Option<T> {
    let span = value.span();
    let mut value = value;
    let mut removed: Vec<String> = Vec::new();
    loop {
        match T::deserialize(ValueDeserializer::from(value.clone())) {
            Ok(v) => return Some(v),
            Err(e) => {
                let at = e.span().map_or(span.start, |s| s.start);
                let message = e.message().to_owned();
                // Taking a bad required key out makes it "missing", and a
                // misspelt key ("brige") makes the real one missing: both
                // already said.
                if removed.iter().any(|k| {
                    message
                        .strip_prefix("missing field `")
                        .and_then(|m| m.strip_suffix('`'))
                        .is_some_and(|missing| near(k, missing))
                }) {
                    return None;
                }
                c.at(Some(at), Some(ctx), None, message);
                let DeValue::Table(table) = value.get_mut() else {
                    return None;
                };
                let inside =
                    |s: std::ops::Range<usize>| s.start <= at && at < s.end.max(s.start + 1);
                // No key holds it (a missing field): nothing more to learn.
                let bad = table
                    .iter()
                    .find(|(k, v)| inside(k.span()) || inside(v.span()))
                    .map(|(k, _)| k.get_ref().to_string())?;
                table.remove(bad.as_str());
                removed.push(bad);
            }
        }
    }
}

/// Whether `a` is `b` or a slip of the keyboard away (at most two edits).
fn near(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()] <= 2
}

fn profiles(
    raw: &[Option<RawProfile>],
    host: &HostConfig,
    c: &mut Collector<'_>,
) -> Option<ProfileSet> {
    if raw.is_empty() {
        c.at(
            None,
            None,
            Some("profile"),
            "no [[profile]] sections; define at least one profile",
        );
        return None;
    }
    let mut converted = Vec::new();
    let mut origin = Vec::new();
    let mut all_ok = true;
    for (i, r) in raw.iter().enumerate() {
        // Checked on what was written, so a profile with other problems
        // still hears of its collision with `[host]`.
        if let Some(r) = r {
            cross_check(host, r, c);
        }
        match r.as_ref().and_then(|r| profile(r, c)) {
            Some(p) => {
                converted.push(p);
                origin.push(i);
            }
            None => all_ok = false,
        }
    }
    match ProfileSet::new(converted) {
        Ok(set) if all_ok => Some(set),
        Ok(_) => None,
        Err(errors) => {
            for e in errors.0 {
                let Some(r) = raw.get(origin[e.index]).and_then(Option::as_ref) else {
                    continue;
                };
                let at = match e.field {
                    ProfileField::Name => start(&r.name),
                    ProfileField::Bridge => start(&r.bridge),
                    ProfileField::Subnet => start(&r.subnet),
                    ProfileField::SubnetV6 => r.subnet_v6.as_ref().and_then(start),
                    ProfileField::Mode => start(&r.mode),
                    ProfileField::Allow => r.allow.first().map_or(start(&r.mode), start),
                    ProfileField::Dns => r.dns.as_ref().map_or(start(&r.mode), start),
                };
                let ctx = format!("profile \"{}\"", e.profile);
                c.at(at, Some(&ctx), Some(e.field.key()), e.problem);
            }
            None
        }
    }
}

fn profile(r: &RawProfile, c: &mut Collector<'_>) -> Option<Profile> {
    let ctx = format!("profile \"{}\"", r.name.get_ref());
    let ctx = Some(ctx.as_str());
    let before = c.errors.len();
    let name = ProfileName::new(r.name.get_ref())
        .map_err(|e| c.at(start(&r.name), ctx, Some("name"), e.to_string()))
        .ok();
    let bridge = BridgeName::new(r.bridge.get_ref())
        .map_err(|e| c.at(start(&r.bridge), ctx, Some("bridge"), e.to_string()))
        .ok();
    let subnet_v4 = r
        .subnet
        .get_ref()
        .parse::<Ipv4Net>()
        .map_err(|_| {
            c.at(
                start(&r.subnet),
                ctx,
                Some("subnet"),
                format!(
                    "`{}` is not an IPv4 subnet; write a CIDR such as \"10.231.1.0/24\"",
                    r.subnet.get_ref()
                ),
            );
        })
        .ok();
    let subnet_v6 =
        match &r.subnet_v6 {
            None => None,
            Some(s) => {
                s.get_ref()
                    .parse::<Ipv6Net>()
                    .map_err(|_| {
                        c.at(start(s), ctx, Some("subnet_v6"), format!(
                "`{}` is not an IPv6 subnet; write a CIDR such as \"fd00:c0a1:1::/64\"",
                s.get_ref()
            ));
                    })
                    .ok()
            }
        };
    let mode = match r.mode.get_ref().as_str() {
        "none" => Some(EgressMode::None),
        "internet" => Some(EgressMode::Internet),
        "allowlist" => Some(EgressMode::Allowlist),
        other => {
            c.at(
                start(&r.mode),
                ctx,
                Some("mode"),
                format!("unknown mode `{other}`; expected one of none, internet, allowlist"),
            );
            None
        }
    };
    let mut allow = Vec::new();
    for entry in &r.allow {
        match entry.get_ref().parse::<AllowEntry>() {
            Ok(e) => allow.push(e),
            Err(e) => c.at(start(entry), ctx, Some("allow"), e.to_string()),
        }
    }
    let block = match r.block.as_ref().map(|s| (s, s.get_ref().as_str())) {
        None | Some((_, "reject")) => BlockAction::Reject,
        Some((_, "drop")) => BlockAction::Drop,
        Some((s, other)) => {
            c.at(
                start(s),
                ctx,
                Some("block"),
                format!("unknown block action `{other}`; expected reject or drop"),
            );
            BlockAction::Reject
        }
    };
    let dns = match r.dns.as_ref().map(|s| (s, s.get_ref().as_str())) {
        None | Some((_, "gateway")) => DnsPolicy::Gateway,
        Some((_, "off")) => DnsPolicy::Off,
        Some((_, "corral")) => DnsPolicy::Corral,
        Some((s, other)) => {
            c.at(
                start(s),
                ctx,
                Some("dns"),
                format!("unknown dns policy `{other}`; expected gateway, corral or off"),
            );
            DnsPolicy::Gateway
        }
    };
    let deny = super::deny::parse_list(&r.deny, ctx, c);
    let learned_max = match &r.learned_max {
        None => DEFAULT_LEARNED_MAX,
        Some(s) => match u32::try_from(*s.get_ref()) {
            Ok(n) if (1..=MAX_LEARNED_MAX).contains(&n) => n,
            _ => {
                c.at(
                    start(s),
                    ctx,
                    Some("learned_max"),
                    format!(
                        "learned_max = {} is out of range; expected addresses per learned set \
                         from 1 to {MAX_LEARNED_MAX} (default {DEFAULT_LEARNED_MAX})",
                        s.get_ref()
                    ),
                );
                DEFAULT_LEARNED_MAX
            }
        },
    };
    let mut limit = |v: &Option<Spanned<i64>>, key: &str, default: u32| match v {
        None => default,
        Some(s) => match u32::try_from(*s.get_ref()) {
            Ok(n) if (1..=FlowLimits::MAX).contains(&n) => n,
            _ => {
                c.at(
                    start(s),
                    ctx,
                    Some(key),
                    format!(
                        "{} is out of range; expected a whole number from 1 to {}",
                        s.get_ref(),
                        FlowLimits::MAX
                    ),
                );
                default
            }
        },
    };
    let flows = FlowLimits {
        max_per_source: limit(
            &r.max_flows_per_source,
            "max_flows_per_source",
            FlowLimits::DEFAULT_MAX_PER_SOURCE,
        ),
        new_per_second: limit(
            &r.new_flows_per_second,
            "new_flows_per_second",
            FlowLimits::DEFAULT_NEW_PER_SECOND,
        ),
    };
    let approvals = approvals(r, mode, dns, ctx, c);
    if c.errors.len() != before {
        return None;
    }
    Some(Profile {
        name: name?,
        bridge: bridge?,
        subnet_v4: subnet_v4?,
        subnet_v6,
        mode: mode?,
        allow,
        block,
        dns,
        allow_unresolved: r.allow_unresolved,
        deny,
        learned_max,
        flows,
        approvals,
    })
}

/// `approvals` and `approval_timeout`: `ask` holds a lookup of an unlisted
/// name for the operator, which only corral's resolver can do, and only
/// an allowlist has unlisted names.
fn approvals(
    r: &RawProfile,
    mode: Option<EgressMode>,
    dns: DnsPolicy,
    ctx: Option<&str>,
    c: &mut Collector<'_>,
) -> Approvals {
    let timeout_secs = match &r.approval_timeout {
        None => DEFAULT_APPROVAL_TIMEOUT_SECS,
        Some(s) => match u32::try_from(*s.get_ref()) {
            Ok(n) if (1..=MAX_APPROVAL_TIMEOUT_SECS).contains(&n) => n,
            _ => {
                c.at(
                    start(s),
                    ctx,
                    Some("approval_timeout"),
                    format!(
                        "approval_timeout = {} is out of range; expected seconds a lookup waits \
                         for the operator, from 1 to {MAX_APPROVAL_TIMEOUT_SECS} (default \
                         {DEFAULT_APPROVAL_TIMEOUT_SECS})",
                        s.get_ref()
                    ),
                );
                DEFAULT_APPROVAL_TIMEOUT_SECS
            }
        },
    };
    let Some(s) = &r.approvals else {
        if let Some(t) = &r.approval_timeout {
            c.at(
                start(t),
                ctx,
                Some("approval_timeout"),
                "approval_timeout without approvals = \"ask\"; add it or remove this line"
                    .to_owned(),
            );
        }
        return Approvals::Off;
    };
    match s.get_ref().as_str() {
        "off" => Approvals::Off,
        "ask" if mode == Some(EgressMode::Allowlist) && dns == DnsPolicy::Corral => {
            Approvals::Ask { timeout_secs }
        }
        "ask" => {
            c.at(
                start(s),
                ctx,
                Some("approvals"),
                "approvals = \"ask\" needs mode = \"allowlist\" and dns = \"corral\": only \
                 corral's resolver can hold a lookup while the operator decides, and only an \
                 allowlist has names it does not list"
                    .to_owned(),
            );
            Approvals::Off
        }
        other => {
            c.at(
                start(s),
                ctx,
                Some("approvals"),
                format!("unknown approvals `{other}`; expected off or ask"),
            );
            Approvals::Off
        }
    }
}

fn phases(raw: &RawPhases, set: Option<&ProfileSet>, c: &mut Collector<'_>) -> PhaseProfiles {
    let mut one = |s: &Option<Spanned<String>>, key: &str| -> Option<ProfileName> {
        let s = s.as_ref()?;
        let known = set.map(ProfileSet::names);
        match known {
            Some(names) if !names.iter().any(|n| n == s.get_ref()) => {
                c.at(
                    start(s),
                    Some("phases"),
                    Some(key),
                    format!(
                        "profile \"{}\" is not configured; configured profiles: {}",
                        s.get_ref(),
                        names.join(", ")
                    ),
                );
                None
            }
            _ => ProfileName::new(s.get_ref())
                .map_err(|e| c.at(start(s), Some("phases"), Some(key), e.to_string()))
                .ok(),
        }
    };
    PhaseProfiles {
        work: one(&raw.work, "work"),
        rework: one(&raw.rework, "rework"),
        audit_agent: one(&raw.audit_agent, "audit_agent"),
        audit_tool: one(&raw.audit_tool, "audit_tool"),
        merge: one(&raw.merge, "merge"),
    }
}

/// Host settings that must not collide with a profile.
fn cross_check(host: &HostConfig, r: &RawProfile, c: &mut Collector<'_>) {
    let ctx = format!("profile \"{}\"", r.name.get_ref());
    let bridge = r.bridge.get_ref().as_str();
    if bridge == host.multipass_bridge.as_str() {
        c.at(
            start(&r.bridge),
            Some(&ctx),
            Some("bridge"),
            format!(
                "bridge \"{bridge}\" is Multipass's control bridge (host.multipass_bridge), \
                whose forwarding corral blocks; choose another bridge name"
            ),
        );
    }
    if host.uplink.as_ref().is_some_and(|u| u.as_str() == bridge) {
        c.at(
            start(&r.bridge),
            Some(&ctx),
            Some("bridge"),
            format!(
                "bridge \"{bridge}\" is the host's uplink (host.uplink); choose another bridge name"
            ),
        );
    }
}
