//! `corral grant USER` / `corral revoke USER [--purge]`: who holds sandbox
//! rights (the restricted tier, see [`crate::callers`]) and the Incus
//! project each of them creates in.
//!
//! A grant records the user in corral's store and converges the user's
//! own project (`corral-u-NAME`): corral's restrictions, images from
//! Incus's `default` project, NIC parents limited by Incus to corral's
//! bridges. The user never talks to Incus: corrald creates in that project
//! on their behalf, and the one-NIC topology check holds every NIC there
//! to its profile's bridge before every start, as in corral's own project.
//! So a user who could reach Incus directly would bypass all of it: root,
//! members of `incus-admin` and members of corral's admin group are
//! refused (they are admins already, or can be).
//!
//! A revoke takes effect at once (corrald reads the grant on every
//! request). Without `--purge` the user's sandboxes stay, stopped or not,
//! for an admin to act on (their project stays on record); with it they
//! are deleted (ports unbound, records gone) and so is the project.

use corral_sandbox_core::audit::AccessRecord;
use corral_sandbox_core::verify::Clock;
use nix::unistd::{Uid, User};
use serde::Serialize;

use crate::callers::{NamedGroup, groups_of};
use crate::error::ServiceError;
use crate::sandboxes::SandboxService;
use crate::store::{GrantRecord, Store, StoreError};

/// The group whose members drive Incus directly (and so could bypass
/// every restriction corral puts on a user's project).
pub const INCUS_ADMIN_GROUP: &str = "incus-admin";

/// A user account, resolved from a name or a uid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Account {
    /// Its name.
    pub user: String,
    /// Its id.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
}

/// Why a grant or revoke was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// No such account.
    #[error(
        "there is no user `{0}` on this host (looked up by name, and by uid when numeric); create the account first (useradd) or name another"
    )]
    UnknownUser(String),
    /// Root is an admin already.
    #[error("`{0}` is root, an admin already; grants are for other users")]
    Root(String),
    /// The user is an admin, or can drive Incus directly.
    #[error(
        "`{user}` is a member of group `{group}` ({why}); a grant would add nothing or be bypassed — remove the user from the group first"
    )]
    Privileged {
        /// The user.
        user: String,
        /// The group.
        group: String,
        /// What membership means.
        why: &'static str,
    },
    /// The user database could not be read.
    #[error(transparent)]
    Lookup(#[from] crate::callers::CallerError),
    /// The store could not be read or written.
    #[error("cannot read or record the grant")]
    Store(#[from] StoreError),
    /// The backend has no projects (not the local Incus daemon).
    #[error("grants need the local Incus daemon (a project per user); this backend has none")]
    NoProjects,
    /// Incus refused or failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl GrantError {
    /// True when the input must change (exit 2): unknown user, root, an
    /// admin or an Incus admin.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            GrantError::UnknownUser(_) | GrantError::Root(_) | GrantError::Privileged { .. }
        )
    }
}

/// Look `who` up: a user name, or a uid when it is all digits.
pub fn resolve(who: &str) -> Result<Account, GrantError> {
    let lookup = |what: String, r: nix::Result<Option<User>>| {
        r.map_err(|source| crate::callers::CallerError::Lookup { what, source })
    };
    let by_name = if who.is_empty() || who.contains('\0') {
        None
    } else {
        lookup(format!("user `{who}`"), User::from_name(who))?
    };
    let user = match by_name {
        Some(u) => Some(u),
        None => match who.parse::<u32>() {
            Ok(uid) => lookup(format!("uid {uid}"), User::from_uid(Uid::from_raw(uid)))?,
            Err(_) => None,
        },
    };
    let user = user.ok_or_else(|| GrantError::UnknownUser(who.to_owned()))?;
    Ok(Account {
        user: user.name,
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
    })
}

/// Refuse root, members of `admin_group` and of `incus-admin`.
pub fn check_grantable(
    account: &Account,
    admin_group: Option<&NamedGroup>,
) -> Result<(), GrantError> {
    if account.uid == 0 {
        return Err(GrantError::Root(account.user.clone()));
    }
    let groups = groups_of(account.uid, account.gid)?;
    if let Some(g) = admin_group
        && groups.contains(&g.gid)
    {
        return Err(GrantError::Privileged {
            user: account.user.clone(),
            group: g.name.clone(),
            why: "corral's admin group: an admin already",
        });
    }
    if let Ok(incus) = NamedGroup::lookup(INCUS_ADMIN_GROUP)
        && groups.contains(&incus.gid)
    {
        return Err(GrantError::Privileged {
            user: account.user.clone(),
            group: incus.name,
            why: "full access to the Incus daemon, around corral",
        });
    }
    Ok(())
}

/// What `corral grant` did.
#[derive(Debug, Clone, Serialize)]
pub struct Granted {
    /// The user.
    pub user: String,
    /// Their uid.
    pub uid: u32,
    /// The tier they hold now.
    pub tier: crate::Tier,
    /// Their Incus project.
    pub project: String,
    /// False when the grant was already in force (nothing changed).
    pub changed: bool,
}

/// Grant `account` sandbox rights: converge their project through
/// `service`'s backend (first: a failure records nothing), then record the
/// grant. Idempotent.
pub async fn grant(
    store: &Store,
    service: &SandboxService,
    account: &Account,
    clock: &dyn Clock,
) -> Result<Granted, GrantError> {
    let existing = store.grant_of(account.uid)?;
    let project = existing.as_ref().map_or_else(
        || corral_provider_incus::project::user_project(&account.user, account.uid),
        |g| g.project.clone(),
    );
    let theirs = service.in_project(&project).ok_or(GrantError::NoProjects)?;
    // Connecting converges the project (created when missing).
    theirs
        .backend()
        .provider()
        .await
        .map_err(ServiceError::from)?;
    let changed = store.grant(account.uid, &account.user, &project, clock.now())?;
    if changed {
        audit(
            store,
            clock,
            AccessRecord::Granted {
                user: account.user.clone(),
                uid: account.uid,
                project: project.clone(),
            },
        );
    }
    Ok(Granted {
        user: account.user.clone(),
        uid: account.uid,
        tier: crate::Tier::Restricted,
        project,
        changed,
    })
}

/// What `corral revoke` did.
#[derive(Debug, Clone, Serialize)]
pub struct Revoked {
    /// The user.
    pub user: String,
    /// Their uid.
    pub uid: u32,
    /// The tier they hold now.
    pub tier: crate::Tier,
    /// Their project, if corral ever made one.
    pub project: Option<String>,
    /// False when no grant was in force (nothing to revoke).
    pub revoked: bool,
    /// Sandboxes deleted (`--purge`).
    pub deleted: Vec<String>,
    /// Sandboxes still in their project (kept without `--purge`).
    pub remaining: Vec<String>,
    /// True when `--purge` deleted the project.
    pub project_removed: bool,
}

/// The account to revoke: a live account, or a grant recorded under that
/// name or uid (the account may be gone since).
pub fn resolve_for_revoke(store: &Store, who: &str) -> Result<Account, GrantError> {
    match resolve(who) {
        Ok(a) => Ok(a),
        Err(GrantError::UnknownUser(_)) => {
            let found: Option<GrantRecord> = store
                .grants()?
                .into_iter()
                .find(|g| g.user == who || who.parse() == Ok(g.uid));
            found
                .map(|g| Account {
                    user: g.user,
                    uid: g.uid,
                    gid: g.uid,
                })
                .ok_or_else(|| GrantError::UnknownUser(who.to_owned()))
        }
        Err(e) => Err(e),
    }
}

/// Revoke `account`'s grant (at once), and with `purge` delete their
/// sandboxes and project. Idempotent.
pub async fn revoke(
    store: &Store,
    service: &SandboxService,
    account: &Account,
    purge: bool,
    clock: &dyn Clock,
) -> Result<Revoked, GrantError> {
    if account.uid == 0 {
        return Err(GrantError::Root(account.user.clone()));
    }
    let revoked = store.revoke(account.uid, clock.now())?;
    let mut out = Revoked {
        user: account.user.clone(),
        uid: account.uid,
        tier: crate::Tier::None,
        project: None,
        revoked,
        deleted: Vec::new(),
        remaining: Vec::new(),
        project_removed: false,
    };
    let Some(record) = store.grant_of(account.uid)? else {
        return Ok(out);
    };
    out.project = Some(record.project.clone());
    let theirs = service
        .in_project(&record.project)
        .ok_or(GrantError::NoProjects)?;
    let exists = theirs
        .backend()
        .project_exists(&record.project)
        .await
        .map_err(ServiceError::from)?;
    let names: Vec<String> = if exists {
        theirs
            .backend()
            .provider()
            .await
            .map_err(ServiceError::from)?
            .list()
            .await
            .map_err(ServiceError::from)?
            .into_iter()
            .map(|i| i.name.to_string())
            .collect()
    } else {
        Vec::new()
    };
    if !purge {
        out.remaining = names;
        if revoked {
            audit(store, clock, revoked_record(&out, false));
        }
        return Ok(out);
    }
    for name in names {
        theirs.delete(&name).await?;
        out.deleted.push(name);
    }
    if exists {
        out.project_removed = theirs
            .backend()
            .remove_project(&record.project)
            .await
            .map_err(ServiceError::from)?;
    }
    service.backend().forget_project(&record.project);
    store.forget_grant(account.uid)?;
    audit(store, clock, revoked_record(&out, true));
    Ok(out)
}

fn revoked_record(out: &Revoked, purged: bool) -> AccessRecord {
    AccessRecord::Revoked {
        user: out.user.clone(),
        uid: out.uid,
        purged,
        deleted: out.deleted.clone(),
    }
}

/// Puts `record` on the audit trail; the change stands even when the trail
/// cannot be written (it is logged).
fn audit(store: &Store, clock: &dyn Clock, record: AccessRecord) {
    if let Err(e) = store
        .audit()
        .append(clock.now(), crate::audit::Entry::Access(record))
    {
        tracing::error!(error = %e, "cannot put a grant or revocation on the audit trail");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_resolve_by_name_or_uid_and_root_is_refused() {
        let root = resolve("root").unwrap();
        assert_eq!((root.uid, root.user.as_str()), (0, "root"));
        assert_eq!(resolve("0").unwrap(), root);
        assert!(matches!(
            check_grantable(&root, None),
            Err(GrantError::Root(_))
        ));
        let e = resolve("corral-no-such-user-x").unwrap_err();
        assert!(
            matches!(e, GrantError::UnknownUser(_)) && e.is_usage(),
            "{e}"
        );
        assert!(matches!(resolve(""), Err(GrantError::UnknownUser(_))));
        // A uid no account has.
        assert!(matches!(
            resolve("4000000001"),
            Err(GrantError::UnknownUser(_))
        ));
    }

    #[test]
    fn members_of_the_admin_group_are_refused() {
        // `nobody` exists on every Linux host; its primary group stands in
        // for corral's admin group.
        let nobody = resolve("nobody").unwrap();
        let admins = NamedGroup {
            name: "stand-in".into(),
            gid: nobody.gid,
        };
        let e = check_grantable(&nobody, Some(&admins)).unwrap_err();
        assert!(
            matches!(e, GrantError::Privileged { .. }) && e.is_usage(),
            "{e}"
        );
        assert!(e.to_string().contains("stand-in"), "{e}");
        check_grantable(&nobody, None).unwrap();
    }
}
