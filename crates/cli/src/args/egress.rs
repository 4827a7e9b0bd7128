//! Looking at and changing what a sandbox may reach: `explain`, `verify`,
//! `events`, `log`, `gate`, `grant`, `revoke`, `cluster`.

use super::SandboxContext;
use clap::{Args, Subcommand, ValueEnum};

/// `corral explain`.
#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The destination: an IP address (IPv6 in brackets when a port
    /// follows) or a host name, an optional port, and tcp, udp or icmp
    /// (default: tcp with a port, icmp without), e.g. `203.0.113.7:443`,
    /// `[2001:db8::1]:53/udp`, `api.example.com:443/tcp`.
    #[arg(value_name = "DEST[:PORT][/PROTO]")]
    pub dest: String,
    /// The profile whose sandboxes send the packet.
    #[arg(
        long,
        value_name = "PROFILE",
        required_unless_present = "sandbox",
        conflicts_with = "sandbox"
    )]
    pub profile: Option<String>,
    /// The sandbox that sends it (its profile, and its bound addresses as
    /// the source).
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Print machine-readable JSON on stdout (schema: docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
    /// Where the profiles, the enforcement and the backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral approvals`.
#[derive(Debug, Clone, Args)]
pub struct ApprovalsArgs {
    /// Print machine-readable JSON on stdout (schema: docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
    /// Where corral's state (and so the held lookups) is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral approve ID` and `corral deny ID`.
#[derive(Debug, Clone, Args)]
pub struct DecideArgs {
    /// The held lookup's id, as `corral approvals` lists it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Approve this lookup only: it is answered, and the same sandbox's
    /// lookups of the name for the next 60 s (the default, and so far the
    /// only scope).
    #[arg(long)]
    pub once: bool,
    /// Print machine-readable JSON on stdout (schema: docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
    /// Where corral's state (and so the held lookups) is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend, profiles and store are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral events`.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// Only this sandbox's events.
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Only events after this id.
    #[arg(long, value_name = "ID")]
    pub after: Option<i64>,
    /// At most this many, the newest (default 100).
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral log`.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Only records about this sandbox.
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Only records naming this profile.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Only records since this time: an age (90s, 10m, 2h, 1d) or a UTC date-time (2026-12-01T10:00:00Z).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only these kinds of record (blocked, dns, lifecycle, verification, access); repeat or separate with commas.
    #[arg(long, value_name = "KIND", value_delimiter = ',')]
    pub kind: Vec<String>,
    /// At most this many records, the newest (default 100 unless --since is given).
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Keep printing records as they are written (Ctrl-C to stop).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object per line (the audit trail's own records) on stdout; the same as `--format json`.
    #[arg(long)]
    pub json: bool,
    /// How records are printed: `text` (the default), `json` (the trail's own records, one per line) or `ocsf` (one OCSF 1.4.0 event per line, for a SIEM).
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "json")]
    pub format: Option<LogFormat>,
    /// Where corral's state (and so the trail) is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// How `corral log` prints records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per record, for people.
    Text,
    /// The trail's own records, one JSON object per line.
    Json,
    /// One OCSF event per line (docs/audit.md#ocsf).
    Ocsf,
}

/// `corral gate`.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral grant`.
#[derive(Debug, Clone, Args)]
pub struct GrantArgs {
    /// The user: a name, or a uid.
    #[arg(value_name = "USER")]
    pub user: String,
    /// corrald's --admin-group: its members are admins already and are
    /// refused.
    #[arg(long, value_name = "GROUP")]
    pub admin_group: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store and the backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral revoke`.
#[derive(Debug, Clone, Args)]
pub struct RevokeArgs {
    /// The user: a name, or a uid (also one whose account is gone).
    #[arg(value_name = "USER")]
    pub user: String,
    /// Also delete the user's sandboxes (and their snapshots) and project.
    #[arg(long)]
    pub purge: bool,
    /// Do not ask before --purge; needed when standard input is not a
    /// terminal.
    #[arg(short, long)]
    pub force: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store and the backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral cluster`.
#[derive(Debug, Clone, Subcommand)]
pub enum ClusterCommand {
    /// Show the Incus cluster's members: what Incus reports, each one's
    /// standing (in rotation or drained, why and since when), the age of
    /// its last attestation, whether profiled work may go there now, and
    /// its sandboxes.
    Status(ClusterStatusArgs),
}

/// `corral cluster status`.
#[derive(Debug, Clone, Args)]
pub struct ClusterStatusArgs {
    /// Print machine-readable JSON on stdout (schema `corral.cluster.v1`).
    #[arg(long)]
    pub json: bool,
    /// Where the standings and the Incus daemon are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}
