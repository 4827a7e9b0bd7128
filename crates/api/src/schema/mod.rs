//! The OpenAPI schemas of library types corrald answers with. The library
//! crates know nothing of OpenAPI (sandbox-core stays free of it), so their
//! shapes are described here, once, and a test serializes real values and
//! checks every field against these descriptions.

#![allow(dead_code)] // Schema-only types: never constructed.

mod host;
mod shapes;
pub use host::{
    ClusterDoc, ExplainAnswerDoc, ExplanationDoc, HostPlanDoc, HostStatusDoc, HostStatusReportDoc,
    HostVerifyDoc, KindStatusDoc, MatrixEntryDoc, ProfilesDoc, ReportDoc, SelectionDoc,
};
pub use shapes::{
    ActionReportDoc, ActionResultDoc, LifetimeDoc, SandboxDetailDoc, SandboxListDoc, SandboxNewDoc,
    SandboxRenameDoc, SandboxRestoreDoc, SandboxSnapshotDoc, TemplateListDoc,
};

use utoipa::ToSchema;

/// Container or virtual machine.
#[derive(Debug, ToSchema)]
#[schema(as = InstanceType)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceTypeDoc {
    /// A system container.
    Container,
    /// A virtual machine.
    Vm,
}

/// A sandbox's lifecycle state.
#[derive(Debug, ToSchema)]
#[schema(as = SandboxState)]
#[serde(rename_all = "lowercase")]
pub enum SandboxStateDoc {
    /// Running.
    Running,
    /// Stopped.
    Stopped,
    /// Frozen.
    Frozen,
    /// Changing state.
    Transitioning,
    /// In error.
    Error,
    /// The backend reported something else.
    Unknown,
}

/// What the provider reports about a sandbox.
#[derive(Debug, ToSchema)]
#[schema(as = SandboxInfo)]
pub struct SandboxInfoDoc {
    /// The sandbox's name.
    name: String,
    /// The backend (`incus`…).
    kind: String,
    /// Lifecycle state.
    state: SandboxStateDoc,
    /// Container or VM.
    instance_type: InstanceTypeDoc,
    /// The profile it is attached to, as stamped at creation.
    profile: Option<String>,
    /// The image it was created from, as stamped at creation.
    image: Option<String>,
    /// Creation time as the backend reports it (RFC 3339 when known).
    created: Option<String>,
    /// Addresses the backend reports for it.
    addresses: Vec<String>,
    /// The NIC's MAC and host-side name (the bridge port) as corral bound
    /// them; null without a network, or for a NIC corral did not bind.
    nic: Option<BoundNicDoc>,
    /// The Incus cluster member it runs on, as Incus reports it; null off
    /// a cluster.
    location: Option<String>,
}

/// A NIC corral bound: its sandbox's frames must carry this MAC, on this
/// bridge port, with the addresses bound to it.
#[derive(Debug, ToSchema)]
#[schema(as = BoundNic)]
pub struct BoundNicDoc {
    /// The NIC's MAC address (`02:c0:…`).
    mac: String,
    /// The host-side interface: the port on the profile's bridge.
    port: String,
}

/// CPU, memory and disk limits; absent leaves the backend's default. Each
/// must fit this host (400 `invalid_spec` names the field otherwise).
#[derive(Debug, ToSchema)]
#[schema(as = Resources)]
pub struct ResourcesDoc {
    /// Virtual CPUs: 1 to the host's CPU count.
    #[schema(minimum = 1)]
    cpus: Option<u32>,
    /// Memory in MiB: 32 to the host's memory.
    #[schema(minimum = 32)]
    memory_mib: Option<u64>,
    /// Root disk size in GiB.
    #[schema(minimum = 1)]
    disk_gib: Option<u64>,
}

/// Raw bytes (a backup, a file).
#[derive(Debug, ToSchema)]
#[schema(as = Bytes, value_type = String, format = Binary)]
pub struct BytesDoc(Vec<u8>);

/// A snapshot of a sandbox.
#[derive(Debug, ToSchema)]
#[schema(as = SnapshotInfo)]
pub struct SnapshotInfoDoc {
    /// Its name.
    name: String,
    /// When it was taken, as the backend reports it.
    created: Option<String>,
}

/// A template new sandboxes are made from (docs/templates.md).
#[derive(Debug, ToSchema)]
#[schema(as = Template)]
pub struct TemplateDoc {
    /// Its name.
    name: String,
    /// One line for listings.
    description: String,
    /// The image (an alias the backend knows).
    image: String,
    /// The unprivileged user the agent works as.
    user: String,
    /// The size preset (`small`, `medium`, `large`), when it names one.
    size: Option<String>,
    /// Resource limits.
    resources: ResourcesDoc,
    /// The time to live its sandboxes get unless the request gives one,
    /// seconds (null: none).
    ttl_secs: Option<u64>,
    /// The idle limit its sandboxes get unless the request gives one,
    /// seconds (null: none).
    idle_stop_secs: Option<u64>,
    /// Packages installed at first boot (by cloud-init).
    packages: Vec<String>,
    /// Shell commands run once, as root, at first boot (by cloud-init).
    install: Vec<String>,
    /// The agent-context file: `path` in the guest, and the `text` the
    /// template adds to corral's own.
    context: serde_json::Value,
    /// Where it came from: `{"kind": "builtin"}` or `{"kind": "file",
    /// "path": …}`.
    source: serde_json::Value,
}

/// What corral knows of a sandbox (the store's record).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxRecord)]
pub struct SandboxRecordDoc {
    /// Its name.
    name: String,
    /// Its backend.
    kind: String,
    /// Its profile, if any.
    profile: Option<String>,
    /// When corral created it (ms since the Unix epoch).
    created: u64,
    /// When its canary last ran (ms since the Unix epoch).
    last_verified: Option<u64>,
    /// What the gate said then: `passed`, `failed` or `refused`.
    verdict: Option<String>,
    /// The uid that created it (absent: created before owners were
    /// recorded, or adopted; admins only).
    owner: Option<u32>,
    /// The image or template it was created from.
    template: Option<String>,
}

/// One event of the log: its place, when it was recorded, whether it is an
/// alert, and the event itself (`event` names its type; the other fields
/// are the type's, docs/verification.md lists them).
#[derive(Debug, ToSchema)]
#[schema(as = StoredEvent)]
pub struct StoredEventDoc {
    /// Its position in the log (increasing).
    id: i64,
    /// When it was recorded (ms since the Unix epoch).
    recorded: u64,
    /// An alert an operator must look at.
    alert: bool,
    /// Its type: `created`, `started`, `refused`, `stopped`, `deleted`,
    /// `verification`, `alert`, … (docs/json-schema.md lists them all,
    /// `member_drained` and `member_restored` for a cluster member's).
    event: String,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use corral_sandbox_core::platform::{entries, select_provider};
    use corral_sandbox_core::sandbox::{InstanceType, Resources, SandboxInfo, SandboxState};
    use corral_sandbox_core::verify::{KindStatus, Timestamp};
    use corral_sandbox_core::{HostOs, SandboxKind, SandboxName};
    use serde::Serialize;
    use utoipa::PartialSchema;
    use utoipa::openapi::{RefOr, Schema};

    use super::*;

    /// The properties and required fields a schema declares.
    fn declared<T: PartialSchema>() -> (BTreeSet<String>, BTreeSet<String>) {
        let RefOr::T(Schema::Object(o)) = T::schema() else {
            panic!("not an object schema");
        };
        (
            o.properties.keys().cloned().collect(),
            o.required.iter().cloned().collect(),
        )
    }

    /// Every required property is in what `value` serializes.
    fn required_held<T: PartialSchema>(value: &impl Serialize) {
        let json = serde_json::to_value(value).unwrap();
        let keys: BTreeSet<String> = json.as_object().unwrap().keys().cloned().collect();
        let (_, required) = declared::<T>();
        let missing: Vec<_> = required.difference(&keys).collect();
        assert!(
            missing.is_empty(),
            "required but absent {missing:?} in {json}"
        );
    }

    /// Every field `value` serializes has a declared property, and every
    /// required property is there.
    fn held<T: PartialSchema>(value: &impl Serialize) {
        let json = serde_json::to_value(value).unwrap();
        let keys: BTreeSet<String> = json.as_object().unwrap().keys().cloned().collect();
        let (props, required) = declared::<T>();
        let undeclared: Vec<_> = keys.difference(&props).collect();
        assert!(
            undeclared.is_empty(),
            "undocumented fields {undeclared:?} in {json}"
        );
        let missing: Vec<_> = required.difference(&keys).collect();
        assert!(
            missing.is_empty(),
            "required but absent {missing:?} in {json}"
        );
    }

    /// A real explanation of the built-in profiles' plan.
    fn explanation() -> corral_service::host::Explanation {
        use corral_egress::plan::explain::{Proto, one_line, reason};
        let cfg = corral_sandbox_core::config::Config::builtin_default();
        let plan = corral_egress::plan::HostPlan::build(
            &cfg.profiles,
            &corral_egress::plan::PlanSettings::default(),
            &corral_egress::resolve::Resolution::new(),
        )
        .unwrap();
        let ip = "203.0.113.10".parse().unwrap();
        let trace = plan
            .trace_profile("allowlist", 6, ip, Some(443), &Default::default())
            .unwrap();
        let live = corral_egress::nft::live_trace::trace_live(
            None,
            &corral_egress::nft::live_trace::Packet {
                protocol: 6,
                src: trace.flow.src,
                dst: ip,
                dport: Some(443),
                iif: corral_egress::nft::live_trace::Iface {
                    name: "corral-allow".into(),
                    group: 0,
                },
                route: corral_egress::nft::live_trace::Route::Local,
            },
        );
        corral_service::host::Explanation {
            profile: "allowlist".into(),
            sandbox: None,
            question: "203.0.113.10:443/tcp".into(),
            dest: "203.0.113.10".into(),
            port: Some(443),
            protocol: Proto::Tcp,
            verdict: live.verdict,
            plan_verdict: trace.verdict,
            drift: Vec::new(),
            name: None,
            answers: vec![corral_service::host::Answer {
                address: ip,
                verdict: live.verdict,
                plan_verdict: trace.verdict,
                reason: reason(&trace),
                line: one_line(&trace, "203.0.113.10:443/tcp"),
                trace,
                live,
                route: corral_egress::nft::live_trace::Route::Local,
            }],
            plan: "built-in defaults".into(),
        }
    }

    #[test]
    fn the_shared_shapes_match_their_descriptions() {
        use corral_service::shapes::{ActionReport, SandboxDetail, SandboxList, SandboxNew};
        let info = SandboxInfo {
            name: SandboxName::new("a1").unwrap(),
            kind: SandboxKind::Incus,
            state: SandboxState::Running,
            instance_type: InstanceType::Container,
            profile: None,
            image: Some("img".into()),
            created: None,
            addresses: vec![],
            nic: None,
            location: None,
        };
        held::<SandboxListDoc>(&SandboxList::new(vec![info.clone()]));
        let life = corral_service::store::LifetimeRecord {
            ttl_secs: Some(60),
            expires: Some(corral_sandbox_core::verify::Timestamp(60_000)),
            idle_stop_secs: Some(30),
        };
        let listed = SandboxList::new(vec![info.clone()]).with_lifetimes(&[("a1".into(), life)]);
        held::<SandboxListDoc>(&listed);
        held::<LifetimeDoc>(&listed.lifetimes["a1"]);
        held::<SandboxDetailDoc>(&SandboxDetail::new(info.clone(), vec![]));
        held::<SandboxNewDoc>(&SandboxNew::new(corral_service::HandedOut {
            info: info.clone(),
            gate: None,
            ready: None,
            template: None,
            from: None,
        }));
        let handed = corral_service::HandedOut {
            info: info.clone(),
            gate: None,
            ready: None,
            template: None,
            from: None,
        };
        held::<SandboxRestoreDoc>(&corral_service::shapes::SandboxRestore::new(
            "snap0", handed,
        ));
        held::<SandboxRenameDoc>(&corral_service::shapes::SandboxRename::new(
            "a0",
            info.clone(),
        ));
        held::<SandboxSnapshotDoc>(&corral_service::shapes::SandboxSnapshot::new(
            "a1",
            corral_sandbox_core::sandbox::SnapshotInfo {
                name: "snap0".into(),
                created: None,
            },
        ));
        let report = ActionReport::done("start", "a1", Some(SandboxState::Running));
        held::<ActionReportDoc>(&report);
        held::<ActionResultDoc>(&report.results[0]);
    }

    #[test]
    fn every_described_type_matches_what_the_library_serializes() {
        held::<SandboxInfoDoc>(&SandboxInfo {
            name: SandboxName::new("a1").unwrap(),
            kind: SandboxKind::Incus,
            state: SandboxState::Running,
            instance_type: InstanceType::Container,
            profile: None,
            image: Some("img".into()),
            created: None,
            addresses: vec!["10.0.0.2".parse().unwrap()],
            nic: Some(corral_sandbox_core::sandbox::BoundNic {
                mac: "02:c0:0a:00:00:02".parse().unwrap(),
                port: corral_sandbox_core::InterfaceName::new("crl0a000002").unwrap(),
            }),
            location: Some("m2".into()),
        });
        held::<BoundNicDoc>(&corral_sandbox_core::sandbox::BoundNic {
            mac: "02:c0:0a:00:00:02".parse().unwrap(),
            port: corral_sandbox_core::InterfaceName::new("crl0a000002").unwrap(),
        });
        held::<SnapshotInfoDoc>(&corral_sandbox_core::sandbox::SnapshotInfo {
            name: "snap0".into(),
            created: Some("2026-12-01T00:00:00Z".into()),
        });
        held::<TemplateListDoc>(&corral_service::shapes::TemplateList::new(
            std::path::Path::new("/etc/corral/templates"),
            corral_service::Catalog::builtin()
                .unwrap()
                .iter()
                .cloned()
                .collect(),
        ));
        for t in corral_service::Catalog::builtin().unwrap().iter() {
            held::<TemplateDoc>(t);
        }
        held::<ResourcesDoc>(&Resources {
            cpus: Some(1),
            memory_mib: Some(64),
            disk_gib: Some(1),
        });
        for e in entries() {
            held::<MatrixEntryDoc>(&e);
        }
        let selection = select_provider(
            HostOs::Linux,
            SandboxKind::Incus,
            &corral_sandbox_core::HostConfig::default(),
            true,
        )
        .unwrap();
        held::<SelectionDoc>(&selection);
        for s in [
            KindStatus::Eligible,
            KindStatus::Demoted {
                until: Timestamp(1),
            },
            KindStatus::Probation {
                since: Timestamp(1),
            },
        ] {
            held::<KindStatusDoc>(&s);
        }
        held::<HostStatusDoc>(&corral_egress::host::Status {
            bridges: Vec::new(),
            counters: Vec::new(),
            sets: Vec::new(),
            drift: 0,
        });
        let cfg = corral_sandbox_core::config::Config::builtin_default();
        held::<ProfilesDoc>(&corral_service::reports::ProfilesReport::new(
            &cfg,
            "built-in defaults",
        ));
        held::<ClusterDoc>(&corral_service::reports::ClusterReport::new(
            Some(&[]),
            None,
            &[],
            std::time::SystemTime::now(),
        ));
        let planned = corral_service::host::Planned {
            plan: corral_egress::plan::HostPlan::build(
                &cfg.profiles,
                &corral_egress::plan::PlanSettings::default(),
                &corral_egress::resolve::Resolution::new(),
            )
            .unwrap(),
            config: cfg,
            origin: "built-in defaults".into(),
            resolution: corral_egress::resolve::Resolution::new(),
            from_applied: true,
            host_networks: None,
        };
        held::<HostPlanDoc>(&corral_service::reports::PlanReport::new(
            &planned,
            Some("lab".into()),
            &[],
        ));
        held::<HostVerifyDoc>(&corral_service::reports::VerifyReport::new(
            &planned,
            None,
            &[],
        ));
        held::<HostStatusReportDoc>(&corral_service::reports::StatusReport::new(
            &planned,
            None,
            corral_egress::host::Status {
                bridges: Vec::new(),
                counters: Vec::new(),
                sets: Vec::new(),
                drift: 0,
            },
            Vec::new(),
            Err("not looked for".into()),
        ));
        let record = corral_service::store::SandboxRecord {
            name: "a1".into(),
            kind: SandboxKind::Incus,
            profile: Some("internet".into()),
            created: Timestamp(1),
            last_verified: Some(Timestamp(2)),
            verdict: Some(corral_service::store::Verdict::Passed),
            owner: Some(1000),
            template: Some("corral-test".into()),
        };
        held::<SandboxRecordDoc>(&record);
        let event = corral_service::store::StoredEvent {
            id: 1,
            recorded: Timestamp(1),
            alert: false,
            event: corral_service::Event::Stopped { name: "a1".into() },
        };
        required_held::<StoredEventDoc>(&event);
        let explanation = explanation();
        held::<ExplanationDoc>(&explanation);
        for a in &explanation.answers {
            held::<ExplainAnswerDoc>(a);
        }
        for state in [
            SandboxState::Running,
            SandboxState::Stopped,
            SandboxState::Unknown,
        ] {
            let v = serde_json::to_value(state).unwrap();
            let RefOr::T(Schema::Object(o)) = SandboxStateDoc::schema() else {
                panic!("not an enum schema");
            };
            let values = o.enum_values.unwrap_or_default();
            assert!(values.contains(&v), "{v} is not among {values:?}");
        }
    }
}
