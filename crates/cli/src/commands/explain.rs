//! `corral explain (--profile P | --sandbox NAME) DEST[:PORT][/PROTO]`:
//! would the kernel's rules let this packet through, and which rule
//! decides; where corral's live tables differ from the plan in force, the
//! drift and the plan's verdict too. Exit 0 whenever an explanation was given, whatever its verdict
//! (the verdict is in the output); 1 when it could not be given; 2 for bad
//! input.

use corral_egress::nft::live_trace::LiveVerdict;
use corral_egress::plan::explain::{Question, verdict_word};
use corral_egress::plan::trace::TraceVerdict;
use corral_service::host::{Explanation, Subject, live_word};
use serde::Serialize;

use super::host::context;
use crate::args::ExplainArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// `corral explain --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct ExplainJson<'a> {
    schema: &'static str,
    #[serde(flatten)]
    explanation: &'a Explanation,
}

/// Explain.
pub fn run(args: &ExplainArgs, out: Output) -> CmdResult {
    let question: Question = args.dest.parse().map_err(CliError::usage)?;
    let loaded = context::load_config(&args.ctx.source)?;
    let service = context::service_for(
        "`corral explain`",
        &loaded,
        args.ctx.netns.as_deref(),
        args.ctx.state_dir.as_deref(),
    )?;
    let planned = context::plan_to_check(loaded, &args.ctx.source, &service)?;
    let subject = match (&args.profile, &args.sandbox) {
        (Some(profile), _) => Subject {
            profile: profile.clone(),
            ..Subject::default()
        },
        (None, Some(name)) => sandbox_subject(args, name, &planned.plan)?,
        (None, None) => {
            return Err(CliError::usage(anyhow::anyhow!(
                "name a profile (--profile) or a sandbox (--sandbox)"
            )));
        }
    };
    let explanation = service
        .explain(&planned, &subject, &question)
        .map_err(|e| {
            if e.is_usage() {
                CliError::usage(e)
            } else {
                CliError::failure(e)
            }
        })?;
    if args.json {
        print_json(&ExplainJson {
            schema: "corral.explain.v1",
            explanation: &explanation,
        })?;
        return Ok(Outcome::Ok);
    }
    render(&explanation, out);
    Ok(Outcome::Ok)
}

/// The sandbox's profile (ownership checked by the service) and its bound
/// addresses.
fn sandbox_subject(
    args: &ExplainArgs,
    name: &str,
    plan: &corral_egress::plan::HostPlan,
) -> Result<Subject, CliError> {
    let (svc, rt) = super::sandbox::service(&args.ctx)?;
    let info = rt.block_on(svc.info(name)).map_err(super::sandbox::fail)?;
    let Some(profile) = info.profile else {
        return Err(CliError::usage(anyhow::anyhow!(
            "sandbox `{name}` has no network: it reaches nothing"
        )));
    };
    let binding = info
        .nic
        .as_ref()
        .and_then(|nic| plan.binding(nic.port.as_str()).filter(|b| b.mac == nic.mac));
    Ok(Subject {
        profile: profile.to_string(),
        sandbox: Some(name.to_owned()),
        v4: binding.map(|b| b.v4),
        v6: binding.and_then(|b| b.v6),
    })
}

fn render(e: &Explanation, out: Output) {
    if let Some(name) = &e.name {
        let listed = if name.entries.is_empty() {
            format!("no allow entry of profile {} lists it", e.profile)
        } else {
            format!(
                "listed by {}",
                name.entries
                    .iter()
                    .map(|x| format!("`{x}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let resolved = match (&name.resolver, name.addresses.is_empty()) {
            (Some(r), false) => format!(
                "; the gateway resolver {r} answers {}",
                name.addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => String::new(),
        };
        let note = name
            .note
            .as_ref()
            .map(|n| format!("; {n}"))
            .unwrap_or_default();
        out.data(&format!("name {}: {listed}{resolved}{note}", name.name));
        if e.answers.is_empty() {
            out.data(&format!(
                "{} {}: no address to trace",
                out.paint(Style::Bad, verdict_word(TraceVerdict::Block)),
                e.question
            ));
        }
    }
    if !e.drift.is_empty() {
        out.data(&format!(
            "{} the kernel's rules differ from the plan ({} difference(s)); the verdicts below are the kernel's:",
            out.paint(Style::Bad, "drift:"),
            e.drift.len()
        ));
        for d in &e.drift {
            out.data(&format!("  {}", d.message));
        }
    }
    for a in &e.answers {
        let style = match a.verdict {
            LiveVerdict::Allow => Style::Good,
            _ => Style::Bad,
        };
        let word = live_word(a.verdict);
        let line = a.line.strip_prefix(word).unwrap_or(&a.line);
        out.data(&format!("{}{line}", out.paint(style, word)));
        out.info(&format!("  kernel path: {}", a.live.path.join(" -> ")));
        if a.live.path != a.trace.path {
            out.info(&format!("  plan path: {}", a.trace.path.join(" -> ")));
        }
    }
}
