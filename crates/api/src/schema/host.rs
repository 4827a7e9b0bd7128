//! Schemas of the host side: profiles, the enforcement matrix, the host
//! plan, verify and status, drill reports and `explain` answers.

use utoipa::ToSchema;

/// One host OS × sandbox kind cell (docs/platform-matrix.md).
#[derive(Debug, ToSchema)]
#[schema(as = MatrixEntry)]
pub struct MatrixEntryDoc {
    /// The host OS.
    host_os: String,
    /// The sandbox kind.
    kind: String,
    /// The cell: support, isolation, classification, why and what to use instead.
    cell: serde_json::Value,
}

/// The provider selected at start-up, as the platform matrix classed it.
#[derive(Debug, ToSchema)]
#[schema(as = Selection)]
pub struct SelectionDoc {
    /// The host OS.
    host_os: String,
    /// The chosen kind.
    kind: String,
    /// What separates the guest from the host kernel.
    isolation: String,
    /// Its egress classification (`enforcement`, `site`).
    classification: serde_json::Value,
    /// Profiled sandboxes of this kind must pass the verification canary.
    verification_required: bool,
}

/// Where an opted-in sandbox kind stands in the verification gate.
#[derive(Debug, ToSchema)]
#[schema(as = KindStatus)]
pub struct KindStatusDoc {
    /// `eligible`, `demoted` or `probation`.
    status: String,
    /// End of the cool-down (ms since the Unix epoch), when demoted.
    until: Option<u64>,
    /// When the cool-down ended (ms since the Unix epoch), on probation.
    since: Option<u64>,
}

/// The configured profiles: schema `corral.profiles.v1`, as `corral
/// profiles --json` prints it (docs/json-schema.md).
#[derive(Debug, ToSchema)]
#[schema(as = Profiles)]
pub struct ProfilesDoc {
    /// `corral.profiles.v1`.
    schema: String,
    /// The configuration file, or `built-in defaults`.
    source: String,
    /// Each profile: name, bridge, subnet, subnet_v6, gateway, mode, allow,
    /// deny, block, dns, allow_unresolved, phases.
    profiles: Vec<serde_json::Value>,
}

/// The Incus cluster's members: schema `corral.cluster.v1`, as `corral
/// cluster status --json` prints it (docs/json-schema.md).
#[derive(Debug, ToSchema)]
#[schema(as = Cluster)]
pub struct ClusterDoc {
    /// `corral.cluster.v1`.
    schema: String,
    /// The Incus server is a cluster member.
    clustered: bool,
    /// The controller's last write (written_at, age_secs, interval_secs,
    /// current), null when it never ran on this member.
    controller: Option<serde_json::Value>,
    /// Each member: member, incus_status, incus_message, standing
    /// (`in_rotation`, `drained`, `unknown`), placeable, refused,
    /// attested_at, attestation_age_secs, reason, since, last_failure,
    /// sandboxes, running.
    members: Vec<serde_json::Value>,
}

/// The plan and its drift: schema `corral.host-plan.v1`, as `corral host
/// plan --json` prints it.
#[derive(Debug, ToSchema)]
#[schema(as = HostPlan)]
pub struct HostPlanDoc {
    /// `corral.host-plan.v1`.
    schema: String,
    /// Where the configuration came from.
    source: String,
    /// `configuration`: the plan is what an apply would enforce.
    basis: String,
    /// The network namespace acted on, null for this host's.
    netns: Option<String>,
    /// The rules in `nft -f` syntax.
    nft: String,
    /// The bridges.
    bridges: Vec<serde_json::Value>,
    /// The sysctls.
    sysctls: Vec<serde_json::Value>,
    /// How many rules.
    rules: u64,
    /// How many set elements.
    elements: u64,
    /// No drift.
    in_sync: bool,
    /// Every difference (area, kind, object, location, detail, message).
    drift: Vec<serde_json::Value>,
}

/// Every difference from the plan: schema `corral.host-verify.v1`, as
/// `corral host verify --json` prints it.
#[derive(Debug, ToSchema)]
#[schema(as = HostVerify)]
pub struct HostVerifyDoc {
    /// `corral.host-verify.v1`.
    schema: String,
    /// Where the configuration came from.
    source: String,
    /// `applied` (what was last applied) or `configuration`.
    basis: String,
    /// The network namespace acted on, null for this host's.
    netns: Option<String>,
    /// No drift.
    in_sync: bool,
    /// Every difference (area, kind, object, location, detail, message).
    drift: Vec<serde_json::Value>,
}

/// The live state beside the plan: schema `corral.host-status.v1`, as
/// `corral host status --json` prints it.
#[derive(Debug, ToSchema)]
#[schema(as = HostStatusReport)]
pub struct HostStatusReportDoc {
    /// `corral.host-status.v1`.
    schema: String,
    /// Where the configuration came from.
    source: String,
    /// `applied` or `configuration`.
    basis: String,
    /// The network namespace acted on, null for this host's.
    netns: Option<String>,
    /// Each bridge's gateway (bridge, state, pid).
    gateways: Vec<serde_json::Value>,
    /// Which sandbox is on which bridge (`attached`) and which is off its
    /// profile's (`detached`); null when not looked for.
    sandboxes: Option<serde_json::Value>,
    /// Why `sandboxes` was not looked for.
    sandboxes_note: Option<String>,
    /// Each profile bridge: name, profile, present, up, managed, addresses.
    bridges: Vec<serde_json::Value>,
    /// Accepted, blocked and unlogged packet counters per profile.
    counters: Vec<serde_json::Value>,
    /// Allowlist set sizes, planned and live.
    sets: Vec<serde_json::Value>,
    /// How many differences the read-back found (`/v1/host/verify` lists them).
    drift: u64,
}

/// Bridges, counters and set sizes of the egress facade.
#[derive(Debug, ToSchema)]
#[schema(as = HostStatus)]
pub struct HostStatusDoc {
    /// Each profile bridge: name, profile, present, up, managed, addresses.
    bridges: Vec<serde_json::Value>,
    /// Accepted and blocked packet counters per profile.
    counters: Vec<serde_json::Value>,
    /// Allowlist set sizes, planned and live.
    sets: Vec<serde_json::Value>,
    /// How many differences the read-back found (`/v1/host/verify` lists them).
    drift: u64,
}

/// What one verification found.
#[derive(Debug, ToSchema)]
#[schema(as = VerificationReport)]
pub struct ReportDoc {
    /// The sandbox.
    sandbox: String,
    /// Its backend.
    kind: String,
    /// Its profile.
    profile: String,
    /// Where the probes ran.
    site: serde_json::Value,
    /// Every check passed.
    passed: bool,
    /// The gate issued its per-sandbox proof (opted-in kinds).
    verified: bool,
    /// Wall time of the whole run, in milliseconds.
    ms: u64,
    /// The gate's event: per-check results, controls and timings.
    event: serde_json::Value,
    /// What corral did after a failure (`stopped`), if anything.
    action: Option<String>,
}

/// `GET /v1/explain`: the verdict for each traced address, the deciding
/// rule and why (docs/json-schema.md, `corral.explain.v1`, describes every
/// nested field).
#[derive(Debug, ToSchema)]
#[schema(as = Explanation)]
pub struct ExplanationDoc {
    /// The profile whose sandbox sends the packet.
    profile: String,
    /// The sandbox, when one was named.
    sandbox: Option<String>,
    /// The destination, normalised: `DEST[:PORT]/PROTO`.
    question: String,
    /// The address or host name asked about.
    dest: String,
    /// The destination port (`null` for ICMP).
    port: Option<u16>,
    /// `tcp`, `udp` or `icmp`.
    #[schema(pattern = "^(tcp|udp|icmp)$")]
    protocol: String,
    /// The kernel's verdict (corral's live tables walked): `allow` when
    /// every traced address is allowed (and there is one), `unknown` when
    /// none is blocked but a live walk met an expression it does not
    /// model, else `block`.
    #[schema(pattern = "^(allow|block|unknown)$")]
    verdict: String,
    /// The plan's verdict, by the same rule (`allow` or `block`).
    #[schema(pattern = "^(allow|block)$")]
    plan_verdict: String,
    /// Every difference between the plan and corral's live tables (as
    /// `corral host verify --json` lists them); empty when the kernel
    /// holds exactly the plan.
    drift: Vec<serde_json::Value>,
    /// For a host name: the allow entries listing it, the gateway resolver
    /// asked and its answers.
    #[schema(nullable)]
    name: Option<serde_json::Value>,
    /// One per traced address.
    answers: Vec<ExplainAnswerDoc>,
    /// Where the plan came from.
    plan: String,
}

/// One traced address.
#[derive(Debug, ToSchema)]
#[schema(as = ExplainAnswer)]
pub struct ExplainAnswerDoc {
    /// The destination address.
    address: String,
    /// The kernel's: `allow`, `block` or `unknown`.
    #[schema(pattern = "^(allow|block|unknown)$")]
    verdict: String,
    /// The plan's: `allow`, `block` or `not_corrals`.
    #[schema(pattern = "^(allow|block|not_corrals)$")]
    plan_verdict: String,
    /// Why, in words (with both verdicts when they differ or the tables
    /// drifted).
    reason: String,
    /// The verdict, deciding rule and reason as one line.
    line: String,
    /// The walk through the plan: flow, profile, verdict, path, rule
    /// (chain, index, nft), set (name, element, learned), entries.
    trace: serde_json::Value,
    /// The walk through the live rules: verdict, path, rule (chain,
    /// handle, index, nft), policy, set (name, element), unknown, note.
    live: serde_json::Value,
    /// The kernel's route: `"local"`, `{"forward": {"name", "group"}}` or
    /// `{"refused": "why"}`.
    route: serde_json::Value,
}
