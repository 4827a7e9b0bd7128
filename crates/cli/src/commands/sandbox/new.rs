//! `corral new`: create a sandbox from a template on a profile's bridge
//! (after the start gate), start it, wait until it holds its DHCP lease
//! and answers exec, put the template's context file in place where the
//! image has no cloud-init, run the canary inside it, and hand it out only
//! when the canary passes. Placement goes through the verification
//! module's placer: after a failed canary the sandbox is disposed of and
//! the work placed again on the next kind that may take it (this CLI
//! drives one kind, so a failure ends with "no sandbox kind can take this
//! work"). With `--from`, a clone of an existing sandbox (or snapshot)
//! with a fresh identity takes the same path from the start gate on.

use std::time::Duration;

use corral_sandbox_core::sandbox::{InstanceType, Resources};
use corral_service::sandboxes::{ByteSize, NewSandbox, Size, Steps, default_profile};
use corral_service::{CreateOptions, HandedOut};

use corral_sandbox_core::HostOs;
use corral_service::verify::placement::{PlaceError, Placer};

use super::context::{fail, verified_service};
use super::render;
use crate::args::{NewArgs, SizeArg};
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

fn resources(args: &NewArgs) -> Result<Resources, CliError> {
    if let Some(size) = args.size {
        return Ok(match size {
            SizeArg::Small => Size::Small,
            SizeArg::Medium => Size::Medium,
            SizeArg::Large => Size::Large,
        }
        .resources());
    }
    let parse = |flag: &str, v: &Option<String>| -> Result<Option<ByteSize>, CliError> {
        v.as_deref()
            .map(|s| {
                s.parse::<ByteSize>().map_err(|e| {
                    CliError::usage(anyhow::Error::new(e).context(format!("--{flag}")))
                })
            })
            .transpose()
    };
    Ok(Resources {
        cpus: args.cpu,
        memory_mib: parse("memory", &args.memory)?.map(|s| s.mib),
        disk_gib: parse("disk", &args.disk)?.map(ByteSize::gib_ceil),
    })
}

/// Create, start and wait.
pub fn run(args: &NewArgs, out: Output) -> CmdResult {
    if args.cpu == Some(0) {
        return Err(CliError::usage(anyhow::anyhow!(
            "--cpu 0: give at least one CPU"
        )));
    }
    let resources = resources(args)?;
    let (svc, verifier, rt) = verified_service(&args.ctx)?;
    let options = CreateOptions {
        start: true,
        ready_timeout: Duration::from_secs(args.timeout),
        // Recorded in the database corrald reads too.
        owner: Some(corral_service::callers::current_uid()),
    };
    if let Some(from) = &args.from {
        let progress = out.progress(&format!("cloning {from} to {}", args.name));
        let result = rt.block_on(svc.clone_sandbox(&args.name, from, options));
        drop(progress);
        return show(&out, args.json, &result.map_err(fail)?);
    }
    let profile = match (&args.profile, args.no_network) {
        (Some(p), _) => Some(p.clone()),
        (None, true) => None,
        (None, false) => Some(default_profile(&svc.settings().config).map_err(|e| fail(e.into()))?),
    };
    let req = NewSandbox {
        name: args.name.clone(),
        image: args.image.clone(),
        template: args.template.clone(),
        profile,
        resources,
        instance_type: if args.vm {
            InstanceType::Vm
        } else {
            InstanceType::Container
        },
        target: args.target.clone(),
        ttl_secs: args.ttl,
        idle_stop_secs: args.idle_stop,
    };
    let host_os = HostOs::from_target_os(std::env::consts::OS).unwrap_or(HostOs::Linux);
    let placer = Placer::new(host_os, vec![svc.clone()], verifier);
    let progress = out.progress(&format!("creating {}", args.name));
    let result = rt.block_on(placer.create(&req, options));
    drop(progress);
    let made = match result {
        Ok(placed) => placed.handed,
        Err(PlaceError::Service {
            source, attempts, ..
        }) if attempts.is_empty() => return Err(fail(source)),
        Err(e) => return Err(CliError::failure(e)),
    };
    show(&out, args.json, &made)
}

/// Where a hand-out's time went, step by step, and their sum.
fn steps_line(s: &Steps) -> String {
    let mut parts = Vec::new();
    let mut total = 0u64;
    let mut step = |name: &str, ms: Option<u64>| {
        if let Some(ms) = ms {
            total = total.saturating_add(ms);
            parts.push(format!("{name} {ms} ms"));
        }
    };
    step("create", s.create_ms);
    step("start", s.start_ms);
    step("lease", s.lease_ms);
    step("exec ready", Some(s.exec_ms));
    step("canary", Some(s.canary_ms));
    format!("{} (total {total} ms)", parts.join(", "))
}

/// Print a sandbox just handed out.
fn show(out: &Output, json: bool, made: &HandedOut) -> CmdResult {
    if json {
        print_json(&corral_service::shapes::SandboxNew::new(made.clone()))?;
        return Ok(Outcome::Ok);
    }
    out.data(&format!(
        "{} {}{} on {}{}; ready in {} ms",
        out.paint(Style::Good, "created"),
        made.info.name,
        made.from
            .as_ref()
            .map_or_else(String::new, |f| format!(" (a clone of {f})")),
        made.info
            .profile
            .as_ref()
            .map_or_else(|| "no network".to_owned(), |p| format!("profile {p}")),
        made.ready
            .as_ref()
            .and_then(|r| r.lease)
            .map_or_else(String::new, |ip| format!(
                ", address {ip} (leased by the gateway)"
            )),
        made.ready.as_ref().map_or(0, |r| r.ms),
    ));
    if let Some(r) = &made.ready {
        out.data(&format!("  time: {}", steps_line(&r.steps)));
    }
    render::handed_out(out, made);
    out.table(&render::table(out, std::slice::from_ref(&made.info)), false);
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_line_names_each_step_and_sums_them() {
        let s = Steps {
            create_ms: Some(120),
            start_ms: None,
            lease_ms: Some(300),
            exec_ms: 40,
            canary_ms: 90,
        };
        assert_eq!(
            steps_line(&s),
            "create 120 ms, lease 300 ms, exec ready 40 ms, canary 90 ms (total 550 ms)"
        );
    }
}
