//! The audit trail in OCSF (the Open Cybersecurity Schema Framework,
//! version [`VERSION`]), for a SIEM that ingests OCSF rather than corral's
//! own records: one OCSF event per trail record, the record itself kept
//! under `unmapped.corral` so nothing the trail says is lost in the
//! mapping.
//!
//! | trail record | OCSF class |
//! |---|---|
//! | blocked packet, suppressed count | Network Activity (4001), Refuse, with the `security_control` profile (action Denied, disposition Blocked, the deciding rule as `firewall_rule`) |
//! | DNS answer, refusal, suppressed count, learned address refused | DNS Activity (4003), Response, `security_control` |
//! | created, started, stopped, deleted, snapshots, files, shells, the escape hatch | Application Lifecycle (6002), the sandbox as the `app` |
//! | verification, alert, gateway died/restarted, unmanaged start, host drift, member drained/restored | Compliance Finding (2003): the control corral checked and whether it held |
//! | grant, revocation | User Access Management (3005) |
//!
//! OCSF has no class for a virtual machine's or container's life, so a
//! sandbox is an application there (its name, kind and profile in `app`);
//! a verification is a compliance check of the control "the sandbox's
//! network profile holds", which is what it is.

use corral_sandbox_core::audit::{AccessRecord, Blocked, DnsDecision, NetRecord};
use corral_sandbox_core::verify::{EventOutcome, VerificationEvent};
use serde_json::{Map, Value, json};

use super::{AuditLine, Entry};
use crate::hooks::Event;

/// The OCSF schema version the events follow.
pub const VERSION: &str = "1.4.0";

/// The OCSF profile that adds a firewall's decision (`action_id`,
/// `disposition_id`, `firewall_rule`) to network and DNS activity.
const SECURITY_CONTROL: &str = "security_control";

/// OCSF severity: informational (a decision corral made as configured).
const INFORMATIONAL: u8 = 1;
/// OCSF severity: medium (a check failed, corral reacted).
const MEDIUM: u8 = 3;
/// OCSF severity: high (an operator must look).
const HIGH: u8 = 4;

/// The OCSF event for one line of the trail.
pub fn event(line: &AuditLine) -> Value {
    let mut e = match &line.entry {
        Entry::Net(n) => net(n),
        Entry::Access(a) => access(a),
        Entry::Sandbox(Event::Verification(v)) => verification(v),
        Entry::Sandbox(ev) => match finding(ev) {
            Some(f) => f,
            None => lifecycle(ev),
        },
    };
    let time = line.recorded.millis();
    let profiles: Vec<&str> = match e.profile {
        Some(p) => vec![p],
        None => Vec::new(),
    };
    // Network and DNS classes have no field for the policy that decided,
    // so the profile goes where OCSF keeps labels for filtering.
    let labels: Vec<String> = line
        .entry
        .profile()
        .map(|p| format!("corral.profile={p}"))
        .into_iter()
        .collect();
    let mut out = Map::new();
    out.insert("class_uid".into(), json!(e.class.uid));
    out.insert("class_name".into(), json!(e.class.name));
    out.insert("category_uid".into(), json!(e.class.category_uid));
    out.insert("category_name".into(), json!(e.class.category_name));
    out.insert("activity_id".into(), json!(e.activity.0));
    out.insert("activity_name".into(), json!(e.activity.1));
    out.insert(
        "type_uid".into(),
        json!(u64::from(e.class.uid) * 100 + u64::from(e.activity.0)),
    );
    out.insert(
        "type_name".into(),
        json!(format!("{}: {}", e.class.name, e.activity.1)),
    );
    out.insert("severity_id".into(), json!(e.severity));
    out.insert("severity".into(), json!(severity_name(e.severity)));
    out.insert("time".into(), json!(time));
    out.insert("message".into(), json!(e.message));
    out.insert(
        "metadata".into(),
        json!({
            "version": VERSION,
            "product": {
                "name": "corral",
                "vendor_name": "corral",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "log_name": "audit",
            "logged_time": time,
            "profiles": profiles,
            "labels": labels,
        }),
    );
    out.append(&mut e.fields);
    let mut unmapped = Map::new();
    // The trail's own record: every field, named as corral names it.
    unmapped.insert(
        "corral".into(),
        serde_json::to_value(&line.entry).unwrap_or(Value::Null),
    );
    out.insert("unmapped".into(), Value::Object(unmapped));
    Value::Object(out)
}

struct Class {
    uid: u32,
    name: &'static str,
    category_uid: u8,
    category_name: &'static str,
}

const NETWORK_ACTIVITY: Class = Class {
    uid: 4001,
    name: "Network Activity",
    category_uid: 4,
    category_name: "Network Activity",
};
const DNS_ACTIVITY: Class = Class {
    uid: 4003,
    name: "DNS Activity",
    category_uid: 4,
    category_name: "Network Activity",
};
const APPLICATION_LIFECYCLE: Class = Class {
    uid: 6002,
    name: "Application Lifecycle",
    category_uid: 6,
    category_name: "Application Activity",
};
const COMPLIANCE_FINDING: Class = Class {
    uid: 2003,
    name: "Compliance Finding",
    category_uid: 2,
    category_name: "Findings",
};
const USER_ACCESS: Class = Class {
    uid: 3005,
    name: "User Access Management",
    category_uid: 3,
    category_name: "Identity & Access Management",
};

/// A mapped record before the common fields are added.
struct Mapped {
    class: Class,
    activity: (u8, &'static str),
    severity: u8,
    message: String,
    profile: Option<&'static str>,
    fields: Map<String, Value>,
}

impl Mapped {
    fn new(class: Class, activity: (u8, &'static str), message: String) -> Self {
        Self {
            class,
            activity,
            severity: INFORMATIONAL,
            message,
            profile: None,
            fields: Map::new(),
        }
    }

    fn with(mut self, key: &str, value: Value) -> Self {
        self.fields.insert(key.to_owned(), value);
        self
    }

    /// A decision of corral's rules or resolver: the `security_control`
    /// profile's fields.
    fn decided(self, allowed: bool, rule: Option<&str>) -> Self {
        let mut m = self;
        m.profile = Some(SECURITY_CONTROL);
        let (action, disposition) = if allowed {
            ((1, "Allowed"), (1, "Allowed"))
        } else {
            ((2, "Denied"), (2, "Blocked"))
        };
        m = m
            .with("action_id", json!(action.0))
            .with("action", json!(action.1))
            .with("disposition_id", json!(disposition.0))
            .with("disposition", json!(disposition.1));
        match rule {
            Some(r) => m.with("firewall_rule", json!({ "uid": r, "name": r })),
            None => m,
        }
    }
}

fn severity_name(id: u8) -> &'static str {
    match id {
        1 => "Informational",
        2 => "Low",
        3 => "Medium",
        4 => "High",
        5 => "Critical",
        _ => "Unknown",
    }
}

/// The endpoint a sandbox's packet or question came from.
fn sandbox_endpoint(ip: std::net::IpAddr, port: Option<u16>, sandbox: Option<&str>) -> Value {
    let mut ep = Map::new();
    ep.insert("ip".into(), json!(ip.to_string()));
    if let Some(p) = port {
        ep.insert("port".into(), json!(p));
    }
    if let Some(s) = sandbox {
        ep.insert("name".into(), json!(s));
    }
    Value::Object(ep)
}

/// IANA protocol numbers for the names the drop log uses.
fn protocol_num(name: &str) -> Option<u8> {
    match name {
        "icmp" => Some(1),
        "tcp" => Some(6),
        "udp" => Some(17),
        "icmpv6" => Some(58),
        "sctp" => Some(132),
        "udplite" => Some(136),
        n => n.parse().ok(),
    }
}

fn net(n: &NetRecord) -> Mapped {
    match n {
        NetRecord::Blocked(b) => blocked(b),
        NetRecord::Suppressed { profile, packets } => Mapped::new(
            NETWORK_ACTIVITY,
            (5, "Refuse"),
            format!(
                "{packets} packet(s) blocked by profile `{profile}` were not logged one by one (its log limit)"
            ),
        )
        .decided(false, None)
        .with("count", json!(packets))
        // The class asks for one endpoint; the profile is all a count
        // knows, so it stands as the source's name.
        .with("src_endpoint", json!({ "name": format!("profile {profile}") }))
        ,
        NetRecord::DnsAnswered(d) => dns(d, true),
        NetRecord::DnsRefused(d) => dns(d, false),
        NetRecord::DnsSuppressed {
            profile,
            src,
            decisions,
        } => Mapped::new(
            DNS_ACTIVITY,
            (2, "Response"),
            format!(
                "{decisions} DNS decision(s) of the gateway of profile `{profile}` for {src} were not recorded one by one (over the asker's budget)"
            ),
        )
        .with("count", json!(decisions))
        .with("src_endpoint", sandbox_endpoint(*src, None, None))
        ,
        NetRecord::LearnRefused {
            profile,
            set,
            addresses,
        } => Mapped::new(
            DNS_ACTIVITY,
            (2, "Response"),
            format!(
                "{addresses} answered address(es) were not learned into `{set}` of profile `{profile}`: the set is full (its learned_max), so they stay blocked"
            ),
        )
        .decided(false, Some(set))
        .with("count", json!(addresses))
        .with("src_endpoint", json!({ "name": format!("profile {profile}") }))
        ,
    }
}

fn blocked(b: &Blocked) -> Mapped {
    let mut conn = Map::new();
    // Outbound: from a sandbox towards whatever it tried to reach.
    conn.insert("direction_id".into(), json!(2));
    conn.insert("direction".into(), json!("Outbound"));
    conn.insert("protocol_name".into(), json!(b.protocol));
    if let Some(n) = protocol_num(&b.protocol) {
        conn.insert("protocol_num".into(), json!(n));
    }
    conn.insert(
        "protocol_ver_id".into(),
        json!(if b.src.is_ipv6() { 6 } else { 4 }),
    );
    let who = b
        .sandbox
        .as_deref()
        .unwrap_or("a source bound to no sandbox");
    Mapped::new(
        NETWORK_ACTIVITY,
        (5, "Refuse"),
        format!(
            "{} {} {} -> {} blocked for {who} by rule {} of profile `{}`",
            b.verdict, b.protocol, b.src, b.dst, b.rule, b.profile
        ),
    )
    .decided(false, Some(&b.rule))
    .with(
        "src_endpoint",
        sandbox_endpoint(b.src, b.sport, b.sandbox.as_deref()),
    )
    .with("dst_endpoint", sandbox_endpoint(b.dst, b.dport, None))
    .with("connection_info", Value::Object(conn))
}

fn dns(d: &DnsDecision, answered: bool) -> Mapped {
    let answers: Vec<Value> = d
        .addresses
        .iter()
        .map(|a| {
            json!({
                "rdata": a.to_string(),
                "type": if a.is_ipv6() { "AAAA" } else { "A" },
            })
        })
        .collect();
    let who = d.sandbox.as_deref().unwrap_or("an unattributed asker");
    let (rcode_id, rcode, message) = if answered {
        (
            0,
            "NoError",
            format!(
                "{} {} answered for {who} by the gateway of profile `{}`",
                d.qtype, d.name, d.profile
            ),
        )
    } else {
        (
            3,
            "NXDomain",
            format!(
                "{} {} refused for {who} by the gateway of profile `{}` (not on its list)",
                d.qtype, d.name, d.profile
            ),
        )
    };
    let mut m = Mapped::new(DNS_ACTIVITY, (2, "Response"), message)
        .decided(answered, None)
        .with(
            "query",
            json!({ "hostname": d.name, "type": d.qtype, "class": "IN" }),
        )
        .with("rcode_id", json!(rcode_id))
        .with("rcode", json!(rcode))
        .with(
            "src_endpoint",
            sandbox_endpoint(d.src, None, d.sandbox.as_deref()),
        );
    if !answers.is_empty() {
        m = m.with("answers", Value::Array(answers));
    }
    m
}

fn access(a: &AccessRecord) -> Mapped {
    match a {
        AccessRecord::Granted { user, uid, project } => Mapped::new(
            USER_ACCESS,
            (1, "Assign Privileges"),
            format!("{user} (uid {uid}) granted sandbox rights in Incus project `{project}`"),
        )
        .with("privileges", json!(["corral sandbox user"]))
        .with("user", json!({ "name": user, "uid": uid.to_string() }))
        .with(
            "resource",
            json!({ "name": project, "type": "Incus project" }),
        ),
        AccessRecord::Revoked {
            user,
            uid,
            purged,
            deleted,
        } => Mapped::new(
            USER_ACCESS,
            (2, "Revoke Privileges"),
            if *purged {
                format!(
                    "{user} (uid {uid}) revoked; their project and {} sandbox(es) deleted",
                    deleted.len()
                )
            } else {
                format!("{user} (uid {uid}) revoked")
            },
        )
        .with("privileges", json!(["corral sandbox user"]))
        .with("user", json!({ "name": user, "uid": uid.to_string() })),
    }
}

/// The sandbox as OCSF's `app` (a product object).
fn app(name: &str) -> Value {
    json!({ "name": name, "vendor_name": "corral", "feature": { "name": "sandbox" } })
}

fn lifecycle(ev: &Event) -> Mapped {
    // OCSF's activities: Install 1, Remove 2, Start 3, Stop 4, Restart 5,
    // Enable 6, Disable 7, Update 8, Other 99.
    let (activity, message): ((u8, &'static str), String) = match ev {
        Event::Created {
            name,
            kind,
            profile,
            template,
            from,
            ..
        } => {
            let mut m = format!("sandbox {name} created");
            if let Some(k) = kind {
                m.push_str(&format!(" ({k})"));
            }
            if let Some(p) = profile {
                m.push_str(&format!(" on profile `{p}`"));
            }
            if let Some(t) = template {
                m.push_str(&format!(" from {t}"));
            }
            if let Some(f) = from {
                m.push_str(&format!(", a copy of {f}"));
            }
            ((1, "Install"), m)
        }
        Event::Starting { name } => ((99, "Starting"), format!("corral starts sandbox {name}")),
        Event::Started { name } => ((3, "Start"), format!("sandbox {name} started")),
        Event::Refused { name, reason } => (
            (3, "Start"),
            format!("sandbox {name} refused a start: {reason}"),
        ),
        Event::Stopped { name } => ((4, "Stop"), format!("sandbox {name} stopped")),
        Event::Deleted { name } => ((2, "Remove"), format!("sandbox {name} deleted")),
        Event::Expired { name, ttl_secs } => (
            (2, "Remove"),
            format!("sandbox {name} expired (time to live {ttl_secs} s): corral deletes it"),
        ),
        Event::IdleStopped {
            name,
            idle_stop_secs,
            idle_secs,
        } => (
            (4, "Stop"),
            format!(
                "sandbox {name} stopped after {idle_secs} s idle (idle limit {idle_stop_secs} s)"
            ),
        ),
        Event::Snapshotted { name, snapshot } => (
            (99, "Snapshot"),
            format!("sandbox {name}: snapshot {snapshot} taken"),
        ),
        Event::Restored { name, snapshot } => (
            (8, "Update"),
            format!("sandbox {name} restored to snapshot {snapshot}"),
        ),
        Event::Renamed { name, from } => {
            ((8, "Update"), format!("sandbox {from} renamed to {name}"))
        }
        Event::Exported { name, file, bytes } => (
            (99, "Export"),
            format!("sandbox {name} exported to {file} ({bytes} bytes)"),
        ),
        Event::FilePushed { name, path, bytes } => (
            (99, "File pushed"),
            format!("{bytes} bytes copied into sandbox {name} at {path}"),
        ),
        Event::FilePulled { name, path, bytes } => (
            (99, "File pulled"),
            format!("{bytes} bytes copied out of sandbox {name} from {path}"),
        ),
        Event::Shell { name } => ((99, "Shell"), format!("a shell opened in sandbox {name}")),
        Event::Hatch { name, args, moved } => (
            (99, "Escape hatch"),
            if moved.is_empty() {
                format!("the Incus client ran on sandbox {name}: {}", args.join(" "))
            } else {
                format!(
                    "the Incus client ran on sandbox {name} with isolation-moving arguments let through ({}): {}",
                    moved.join(" "),
                    args.join(" ")
                )
            },
        ),
        // Every other event is a finding (see `finding`); one that is not
        // still maps, as an application event named by its type.
        other => ((99, "Other"), format!("{} event", other.type_name())),
    };
    let name = ev.sandbox().unwrap_or("-");
    let mut m = Mapped::new(APPLICATION_LIFECYCLE, activity, message).with("app", app(name));
    let (status_id, status) = match ev {
        Event::Refused { reason, .. } => {
            m = m.with("status_detail", json!(reason));
            (2, "Failure")
        }
        _ => (1, "Success"),
    };
    m.with("status_id", json!(status_id))
        .with("status", json!(status))
}

/// A compliance finding: `control` checked on `resource`, held or not.
fn compliance(
    control: &str,
    held: bool,
    message: String,
    severity: u8,
    uid: String,
    resource: Value,
) -> Mapped {
    let (status_id, status) = if held { (1, "Pass") } else { (3, "Fail") };
    let mut m = Mapped::new(COMPLIANCE_FINDING, (1, "Create"), message)
        .with(
            "compliance",
            json!({
                "standards": ["corral egress isolation"],
                "control": control,
                "status_id": status_id,
                "status": status,
            }),
        )
        .with("finding_info", json!({ "uid": uid, "title": control }))
        .with("resources", json!([resource]));
    m.severity = if held { INFORMATIONAL } else { severity };
    m
}

fn sandbox_resource(name: &str) -> Value {
    json!({ "name": name, "type": "corral sandbox" })
}

fn verification(v: &VerificationEvent) -> Mapped {
    let held = matches!(v.outcome, EventOutcome::Passed);
    let mut m = compliance(
        "the sandbox reaches exactly what its network profile allows (canary)",
        held,
        v.message.clone(),
        MEDIUM,
        format!("verification/{}/{}", v.sandbox, v.at.millis()),
        sandbox_resource(v.sandbox.as_str()),
    );
    let checks: Vec<String> = v
        .checks
        .iter()
        .map(|c| {
            format!(
                "{} {}: {}",
                if c.passed { "pass" } else { "FAIL" },
                c.target,
                c.output
            )
        })
        .collect();
    if !checks.is_empty() {
        m = m.with("status_detail", json!(checks.join("; ")));
    }
    m
}

/// What supervision found, as a finding; `None` for a lifecycle event.
fn finding(ev: &Event) -> Option<Mapped> {
    let at = |what: &str, who: &str| format!("{what}/{who}");
    Some(match ev {
        Event::Alert { name, reason } => compliance(
            "a sandbox that fails verification is disposed of",
            false,
            format!("alert on sandbox {name}: {reason}"),
            HIGH,
            at("alert", name),
            sandbox_resource(name),
        ),
        Event::UnmanagedStart {
            name,
            admitted,
            reason,
        } => compliance(
            "every start of a profiled sandbox passes the start gate",
            *admitted,
            format!("sandbox {name} started outside corral: {reason}"),
            HIGH,
            at("unmanaged-start", name),
            sandbox_resource(name),
        ),
        Event::GatewayDied {
            bridge,
            profile,
            reason,
            ..
        } => compliance(
            "each profile's gateway runs",
            false,
            format!(
                "the gateway of {} died: {reason}",
                profile.as_deref().unwrap_or(bridge)
            ),
            MEDIUM,
            at("gateway", bridge),
            json!({ "name": bridge, "type": "corral bridge" }),
        ),
        Event::GatewayRestarted {
            bridge,
            profile,
            attempts,
            down_ms,
            ..
        } => compliance(
            "each profile's gateway runs",
            true,
            format!(
                "the gateway of {} runs again after {down_ms} ms down ({attempts} attempt(s))",
                profile.as_deref().unwrap_or(bridge)
            ),
            MEDIUM,
            at("gateway", bridge),
            json!({ "name": bridge, "type": "corral bridge" }),
        ),
        Event::HostDrift {
            profiles,
            drift,
            reaction,
            ..
        } => compliance(
            "the host's enforcement is what corral applied",
            false,
            format!(
                "the kernel's rules drifted ({}): {reaction}",
                drift.join("; ")
            ),
            HIGH,
            at("host-drift", &profiles.join(",")),
            json!({ "name": "table inet corral", "type": "nftables table" }),
        ),
        Event::MemberDrained { member, reason } => compliance(
            "a cluster member in rotation attests corral's enforcement",
            false,
            format!("member {member} drained: {reason}"),
            MEDIUM,
            at("member", member),
            json!({ "name": member, "type": "Incus cluster member" }),
        ),
        Event::MemberRestored { member } => compliance(
            "a cluster member in rotation attests corral's enforcement",
            true,
            format!("member {member} back in rotation"),
            MEDIUM,
            at("member", member),
            json!({ "name": member, "type": "Incus cluster member" }),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
