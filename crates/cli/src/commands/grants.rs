//! `corral grant USER` and `corral revoke USER [--purge]`: the restricted
//! tier's users, recorded in the store corrald reads on every request, and
//! each one's Incus project (see `corral_service::grants`). Root only: a
//! grant decides who may create sandboxes. Both are idempotent.

use corral_service::WallClock;
use corral_service::callers::NamedGroup;
use corral_service::grants::{self, GrantError, Granted, Revoked};
use serde::Serialize;

use super::sandbox::confirm::destructive;
use super::sandbox::verified_service;
use crate::args::{GrantArgs, RevokeArgs, SandboxContext};
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, print_json};

#[derive(Serialize)]
struct Json<'a, T: Serialize> {
    schema: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

fn classify(e: GrantError) -> CliError {
    if e.is_usage() {
        CliError::usage(e)
    } else {
        CliError::failure(e)
    }
}

fn root_only(verb: &str) -> Result<(), CliError> {
    if corral_service::callers::current_uid() == 0 {
        Ok(())
    } else {
        Err(CliError::failure(anyhow::anyhow!(
            "`corral {verb}` is for admins: it decides who may create sandboxes; run it as root (`sudo corral {verb} …`)"
        )))
    }
}

fn service(
    ctx: &SandboxContext,
) -> Result<
    (
        corral_service::SandboxService,
        std::sync::Arc<corral_service::Store>,
        tokio::runtime::Runtime,
    ),
    CliError,
> {
    let (svc, verifier, rt) = verified_service(ctx)?;
    let store = std::sync::Arc::clone(verifier.store());
    Ok((svc, store, rt))
}

/// Grant.
pub fn grant(args: &GrantArgs, out: Output) -> CmdResult {
    root_only("grant")?;
    // Refused before anything is opened: bad input changes nothing.
    let account = grants::resolve(&args.user).map_err(classify)?;
    let admins = args
        .admin_group
        .as_deref()
        .map(NamedGroup::lookup)
        .transpose()
        .map_err(|e| CliError::usage(anyhow::Error::new(e).context("--admin-group")))?;
    grants::check_grantable(&account, admins.as_ref()).map_err(classify)?;
    let (svc, store, rt) = service(&args.ctx)?;
    let done: Granted = rt
        .block_on(grants::grant(&store, &svc, &account, &WallClock))
        .map_err(classify)?;
    if args.json {
        print_json(&Json {
            schema: "corral.grant.v1",
            body: &done,
        })?;
    } else if done.changed {
        out.data(&format!(
            "granted {} (uid {}) sandbox rights: tier restricted through corrald's socket; their sandboxes go in Incus project {}",
            done.user, done.uid, done.project
        ));
    } else {
        out.data(&format!(
            "{} (uid {}) already holds sandbox rights (Incus project {}, converged); nothing else changed",
            done.user, done.uid, done.project
        ));
    }
    Ok(Outcome::Ok)
}

/// Revoke.
pub fn revoke(args: &RevokeArgs, out: Output) -> CmdResult {
    root_only("revoke")?;
    if args.purge
        && !destructive(
            args.force,
            &format!("purge {}'s sandboxes", args.user),
            &format!(
                "delete every sandbox of {} (and their snapshots) and their Incus project? This cannot be undone.",
                args.user
            ),
        )?
    {
        out.info("nothing revoked");
        return Ok(Outcome::Failed);
    }
    let (svc, store, rt) = service(&args.ctx)?;
    let account = grants::resolve_for_revoke(&store, &args.user).map_err(classify)?;
    let done: Revoked = rt
        .block_on(grants::revoke(
            &store, &svc, &account, args.purge, &WallClock,
        ))
        .map_err(classify)?;
    if args.json {
        print_json(&Json {
            schema: "corral.revoke.v1",
            body: &done,
        })?;
        return Ok(Outcome::Ok);
    }
    out.data(&if done.revoked {
        format!(
            "revoked {} (uid {}): tier none from the next request",
            done.user, done.uid
        )
    } else {
        format!(
            "{} (uid {}) holds no sandbox rights (revoked before, or never granted); nothing to revoke",
            done.user, done.uid
        )
    });
    if !done.deleted.is_empty() {
        out.data(&format!("deleted sandboxes: {}", done.deleted.join(", ")));
    }
    match (&done.project, done.project_removed) {
        (Some(p), true) => out.data(&format!("deleted Incus project {p}")),
        (Some(p), false) if !done.remaining.is_empty() => out.data(&format!(
            "{} in Incus project {p} ({}); admins can still act on {}; `corral revoke {} --purge` deletes {} and the project",
            match done.remaining.len() {
                1 => "1 sandbox remains".to_owned(),
                n => format!("{n} sandboxes remain"),
            },
            done.remaining.join(", "),
            if done.remaining.len() == 1 { "it" } else { "them" },
            done.user,
            if done.remaining.len() == 1 { "it" } else { "them" },
        )),
        (Some(p), false) if !args.purge => out.data(&format!(
            "Incus project {p} is kept (empty); `corral revoke {} --purge` deletes it",
            done.user
        )),
        _ => {}
    }
    Ok(Outcome::Ok)
}
