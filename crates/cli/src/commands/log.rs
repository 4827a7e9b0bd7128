//! `corral log`: the audit trail — blocked packets, DNS decisions,
//! lifecycle and verification — oldest first, and as it grows.

use std::io::Write as _;
use std::time::Duration;

use corral_sandbox_core::audit::{AccessRecord, NetRecord};
use corral_sandbox_core::verify::Clock as _;
use std::sync::Arc;

use corral_service::audit::collector::ServiceNics;
use corral_service::audit::{
    AuditFilter, AuditLine, AuditLog, Collector, Entry, EntryKind, parse_since,
};
use corral_service::audit::{coverage, ocsf};
use corral_service::clock::WallClock;

use crate::args::{LogArgs, LogFormat};
use crate::commands::verification::summary;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style};

/// Records printed when neither `--last` nor `--since` says how many.
const DEFAULT_LAST: usize = 100;
/// How often `--follow` looks for new records.
const POLL: Duration = Duration::from_millis(100);

/// Print, then maybe follow.
pub fn run(args: &LogArgs, out: Output) -> CmdResult {
    let filter = filter(args)?;
    let (settings, _store) = crate::commands::sandbox::store(&args.ctx)?;
    let log = AuditLog::open(&settings.state_dir).map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context("cannot open the audit trail"))
    })?;
    // Position the follower before reading, so nothing written in between
    // is lost (a record may then print twice, never zero times).
    let mut follower = args.follow.then(|| log.follow());
    let (lines, bad) = log
        .read(&filter)
        .map_err(|e| CliError::failure(anyhow::Error::new(e)))?;
    if bad > 0 {
        tracing::warn!(
            "{bad} line(s) of {} did not parse and were skipped",
            log.path().display()
        );
    }
    let format = args.format.unwrap_or(if args.json {
        LogFormat::Json
    } else {
        LogFormat::Text
    });
    let machine = format != LogFormat::Text;
    let mut stdout = std::io::stdout().lock();
    for l in &lines {
        print_line(&mut stdout, l, format, out)?;
    }
    if lines.is_empty() && !machine && !args.follow {
        out.info(&format!("no records in {}", log.path().display()));
    }
    if !args.follow {
        say_what_was_not_seen(&settings.state_dir, &filter, machine, out);
    }
    let Some(follower) = follower.as_mut() else {
        return Ok(Outcome::Ok);
    };
    // Records are made only while a collector runs: be it, unless corrald
    // (or another follower) already is.
    // (The collector is dropped before the runtime it lists on.)
    let (_runtime, _collector) = collect(args)?;
    let live = AuditFilter {
        last: None,
        ..filter
    };
    let last_seen = lines.last().map(|l| l.recorded);
    loop {
        stdout
            .flush()
            .map_err(|e| CliError::failure(anyhow::Error::new(e)))?;
        std::thread::sleep(POLL);
        for l in follower.poll() {
            if live.matches(&l) && last_seen.is_none_or(|t| l.recorded >= t) {
                print_line(&mut stdout, &l, format, out)?;
            }
        }
    }
}

/// Network records exist only for the spans a collector ran: say so when
/// none runs now and the filter asks for them (on stderr under `--json`,
/// whose stdout holds records alone).
fn say_what_was_not_seen(
    state_dir: &std::path::Path,
    filter: &AuditFilter,
    json: bool,
    out: Output,
) {
    let wants_net = filter.kinds.is_empty()
        || filter
            .kinds
            .iter()
            .any(|k| matches!(k, EntryKind::Blocked | EntryKind::Dns));
    if !wants_net {
        return;
    }
    let gap = match coverage::coverage(state_dir) {
        Ok(c) => c.gap(),
        Err(e) => Some(format!(
            "cannot tell whether network records were collected ({}); they are recorded only \
             while corrald or `corral log --follow` runs",
            anyhow::Error::new(e)
        )),
    };
    let Some(gap) = gap else { return };
    if json {
        tracing::warn!("{gap}");
    } else {
        out.info(&format!("note: {gap}"));
    }
}

/// Starts this process's collector when no other runs (the runtime lists
/// sandboxes for attribution and must outlive the collector).
fn collect(
    args: &LogArgs,
) -> Result<(Option<tokio::runtime::Runtime>, Option<Collector>), CliError> {
    let (service, _, runtime) = crate::commands::sandbox::verified_service(&args.ctx)?;
    let state_dir = service.settings().state_dir.clone();
    let netns = service.settings().netns.clone();
    let nics = Arc::new(ServiceNics::new(service, runtime.handle().clone()));
    match Collector::try_start(&state_dir, netns.as_deref(), nics) {
        Ok(Some(c)) => {
            tracing::info!(
                "collecting blocked packets and DNS decisions while following (no corrald runs)"
            );
            Ok((Some(runtime), Some(c)))
        }
        Ok(None) => Ok((None, None)),
        Err(e) => {
            tracing::warn!(error = %format!("{:#}", anyhow::Error::new(e)), "not collecting: only records others write are shown");
            Ok((None, None))
        }
    }
}

fn filter(args: &LogArgs) -> Result<AuditFilter, CliError> {
    let since = args
        .since
        .as_deref()
        .map(|s| parse_since(s, WallClock.now()))
        .transpose()
        .map_err(|e| CliError::usage(anyhow::Error::new(e)))?;
    let kinds = args
        .kind
        .iter()
        .map(|k| k.parse::<EntryKind>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::usage(anyhow::anyhow!("--kind: {e}")))?;
    if args.last == Some(0) {
        return Err(CliError::usage(anyhow::anyhow!(
            "--last 0: give at least 1"
        )));
    }
    Ok(AuditFilter {
        sandbox: args.sandbox.clone(),
        profile: args.profile.clone(),
        since,
        kinds,
        last: args.last.or(since.is_none().then_some(DEFAULT_LAST)),
    })
}

fn print_line(
    w: &mut impl std::io::Write,
    l: &AuditLine,
    format: LogFormat,
    out: Output,
) -> Result<(), CliError> {
    let text = if format == LogFormat::Json {
        crate::output::note_stdout();
        serde_json::to_string(l).map_err(|e| CliError::failure(anyhow::Error::new(e)))?
    } else if format == LogFormat::Ocsf {
        crate::output::note_stdout();
        ocsf::event(l).to_string()
    } else {
        let (event, what) = describe(&l.entry);
        let event = match l.entry.kind() {
            EntryKind::Blocked => out.paint(Style::Bad, &event),
            _ => event,
        };
        format!(
            "{}  {:<14} {:<10} {:<12} {what}",
            l.time,
            l.entry.sandbox().unwrap_or("-"),
            l.entry.profile().unwrap_or("-"),
            event,
        )
    };
    writeln!(w, "{text}").map_err(|e| CliError::failure(anyhow::Error::new(e)))
}

/// The record's event name and one line about it.
fn describe(e: &Entry) -> (String, String) {
    match e {
        Entry::Sandbox(ev) => (ev.type_name().to_owned(), summary(ev)),
        Entry::Net(NetRecord::Blocked(b)) => {
            let port = |p: Option<u16>| p.map_or_else(String::new, |p| format!(":{p}"));
            (
                "blocked".to_owned(),
                format!(
                    "{} {}{} -> {}{} by {} ({})",
                    b.protocol,
                    b.src,
                    port(b.sport),
                    b.dst,
                    port(b.dport),
                    b.rule,
                    b.verdict
                ),
            )
        }
        Entry::Access(AccessRecord::Granted { user, uid, project }) => (
            "granted".to_owned(),
            format!("{user} (uid {uid}) may create sandboxes, in Incus project {project}"),
        ),
        Entry::Access(AccessRecord::Revoked {
            user,
            uid,
            purged,
            deleted,
        }) => (
            "revoked".to_owned(),
            if *purged {
                format!(
                    "{user} (uid {uid}) refused from now on; purged: {} sandbox(es) deleted{}",
                    deleted.len(),
                    if deleted.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", deleted.join(", "))
                    }
                )
            } else {
                format!("{user} (uid {uid}) refused from now on; their sandboxes kept")
            },
        ),
        Entry::Net(NetRecord::DnsSuppressed { src, decisions, .. }) => (
            "dns_suppressed".to_owned(),
            format!(
                "{decisions} more DNS decision(s) for {src} over the log budget, not logged one by one"
            ),
        ),
        Entry::Net(NetRecord::LearnRefused { set, addresses, .. }) => (
            "learn_refused".to_owned(),
            format!(
                "{addresses} answered address(es) not learned: set {set} is full (learned_max)"
            ),
        ),
        Entry::Net(NetRecord::Suppressed { packets, .. }) => (
            "suppressed".to_owned(),
            format!("{packets} more blocked packet(s) over the log limit, not logged one by one"),
        ),
        Entry::Net(NetRecord::DnsAnswered(d)) => (
            "dns_answered".to_owned(),
            format!(
                "{} {} -> {}",
                d.qtype,
                d.name,
                if d.addresses.is_empty() {
                    "no address".to_owned()
                } else {
                    d.addresses
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ),
        Entry::Net(NetRecord::DnsRefused(d)) => (
            "dns_refused".to_owned(),
            format!(
                "{} {} -> NXDOMAIN (not on the profile's list)",
                d.qtype, d.name
            ),
        ),
    }
}
