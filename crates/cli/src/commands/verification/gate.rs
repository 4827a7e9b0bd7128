//! `corral gate`: the verification gate as the store holds it — opted-in
//! kinds, each kind's standing (eligible, demoted until…, probation), and
//! every sandbox's last verification.

use corral_sandbox_core::verify::{Clock as _, KindStatus};
use corral_service::WallClock;
use corral_service::shapes::GateView;

use super::utc;
use crate::args::GateArgs;
use crate::commands::sandbox::store;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// Show.
pub fn run(args: &GateArgs, out: Output) -> CmdResult {
    let (settings, db) = store(&args.ctx)?;
    let failure = |e| CliError::failure(anyhow::Error::new(e));
    let gate = db
        .gate(&settings.config.host.verification)
        .map_err(failure)?;
    let sandboxes = db.sandboxes().map_err(failure)?;
    let now = WallClock.now();
    let view = GateView::new(db.path(), &gate, now, sandboxes);
    if args.json {
        print_json(&view)?;
        return Ok(Outcome::Ok);
    }
    if gate.opted_in().is_empty() {
        out.info("no kind is opted in to per-sandbox verification (host.verification.kinds)");
    }
    if !view.kinds.is_empty() {
        let mut t = Table::new(["kind", "standing", "why"]);
        for k in &view.kinds {
            let standing = match k.status {
                KindStatus::Eligible => out.paint(Style::Good, "eligible"),
                KindStatus::NotOptedIn => "not opted in".to_owned(),
                KindStatus::Demoted { until } => {
                    out.paint(Style::Bad, &format!("demoted until {}", utc(until)))
                }
                KindStatus::Probation { since } => {
                    out.paint(Style::Warn, &format!("probation since {}", utc(since)))
                }
            };
            t.row([
                k.kind.to_string(),
                standing,
                k.demotion_reason.clone().unwrap_or_default(),
            ]);
        }
        out.table(&t, true);
    }
    let mut t = Table::new([
        "sandbox",
        "kind",
        "profile",
        "created (UTC)",
        "last verified",
        "verdict",
    ]);
    for s in &view.sandboxes {
        t.row([
            s.name.clone(),
            s.kind.to_string(),
            s.profile
                .clone()
                .unwrap_or_else(|| "(no network)".to_owned()),
            utc(s.created),
            s.last_verified.map_or_else(|| "never".to_owned(), utc),
            match s.verdict {
                None => "-".to_owned(),
                Some(v) if v == corral_service::store::Verdict::Passed => {
                    out.paint(Style::Good, v.as_str())
                }
                Some(v) => out.paint(Style::Bad, v.as_str()),
            },
        ]);
    }
    out.table(&t, true);
    out.info(&format!("store: {}", db.path().display()));
    Ok(Outcome::Ok)
}
