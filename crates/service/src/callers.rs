//! Who is calling, and what they may do: one rule for every front-end.
//!
//! A caller is a Unix identity (corrald reads it from the socket's peer
//! credentials, `SO_PEERCRED`; the CLI is its own process) sorted into a
//! [`Tier`]:
//! - **admin**: root, or a member of the configured admin group: every
//!   route, every sandbox;
//! - **restricted**: a user granted sandbox rights ([`Grants`]): sandboxes
//!   only, and only the ones recorded as theirs;
//! - **none**: everyone else, refused.
//!
//! Grants are behind a trait so where they live can change without the
//! rule changing: the users `corral grant` recorded in corral's database
//! ([`StoreGrants`], read on every request, so a revoke holds at once),
//! and members of a Unix group ([`GroupGrants`], corrald's
//! `--users-group`), either or both ([`AnyGrants`]).

use std::fmt;
use std::sync::Arc;

use nix::unistd::{Gid, Group, Uid, User};
use serde::Serialize;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Everything.
    Admin,
    /// Their own sandboxes.
    Restricted,
    /// Nothing.
    None,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Admin => "admin",
            Tier::Restricted => "restricted",
            Tier::None => "none",
        })
    }
}

/// An identified caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// Its user id.
    pub uid: u32,
    /// Its primary group id.
    pub gid: u32,
    /// What it may do.
    pub tier: Tier,
}

impl Caller {
    /// An admin acting as `uid`/`gid` (the holder of corrald's token, or
    /// the CLI run by root).
    pub fn admin(uid: u32, gid: u32) -> Self {
        Self {
            uid,
            gid,
            tier: Tier::Admin,
        }
    }

    /// True for admins.
    pub fn is_admin(&self) -> bool {
        self.tier == Tier::Admin
    }

    /// May this caller see and act on a sandbox recorded as `owner`'s
    /// (`None`: no owner on record, which only admins may touch)?
    pub fn may_act_on(&self, owner: Option<u32>) -> bool {
        match self.tier {
            Tier::Admin => true,
            Tier::Restricted => owner == Some(self.uid),
            Tier::None => false,
        }
    }
}

/// Looking a caller up failed.
#[derive(Debug, thiserror::Error)]
pub enum CallerError {
    /// No group has this name.
    #[error("there is no group `{0}` on this host; create it (groupadd) or name another")]
    NoSuchGroup(String),
    /// The user database could not be read.
    #[error("cannot read the user database for {what}")]
    Lookup {
        /// What was looked up.
        what: String,
        /// The cause.
        #[source]
        source: nix::Error,
    },
    /// The grants could not be read.
    #[error("cannot read the sandbox grants: {0}")]
    Grants(String),
    /// The owner records could not be read or written.
    #[error("cannot read or record sandbox owners: {0}")]
    Owners(String),
}

/// Who owns which sandbox: recorded at create (the `owner` of
/// [`crate::CreateOptions`]), read before a restricted caller may see or
/// act on a sandbox.
pub trait Owners: Send + Sync + fmt::Debug {
    /// The uid recorded as `sandbox`'s owner (`None`: no record, or no
    /// owner on it).
    fn owner(&self, sandbox: &str) -> Result<Option<u32>, CallerError>;
}

/// corral's database records each sandbox's owner.
impl Owners for crate::Store {
    fn owner(&self, sandbox: &str) -> Result<Option<u32>, CallerError> {
        self.sandbox(sandbox)
            .map(|r| r.and_then(|r| r.owner))
            .map_err(|e| CallerError::Owners(crate::error::chain(&e)))
    }
}

/// The uid this process runs as (the CLI records it as a sandbox's owner).
pub fn current_uid() -> u32 {
    Uid::current().as_raw()
}

/// Who holds sandbox rights (the restricted tier).
pub trait Grants: Send + Sync + fmt::Debug {
    /// True when user `uid` (whose groups are `groups`) holds them.
    fn granted(&self, uid: u32, groups: &[u32]) -> Result<bool, CallerError>;

    /// Where grants come from, for messages (`members of group corral`).
    fn describe(&self) -> String;

    /// False for a source that grants nobody, ever ([`NoGrants`]).
    fn may_grant(&self) -> bool {
        true
    }
}

/// Nobody is granted anything: only admins may call.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoGrants;

impl Grants for NoGrants {
    fn granted(&self, _uid: u32, _groups: &[u32]) -> Result<bool, CallerError> {
        Ok(false)
    }

    fn describe(&self) -> String {
        "no user (no users group is configured)".to_owned()
    }

    fn may_grant(&self) -> bool {
        false
    }
}

/// The members of one Unix group (primary or supplementary) are granted.
#[derive(Debug, Clone)]
pub struct GroupGrants {
    group: NamedGroup,
}

impl GroupGrants {
    /// Members of `group`.
    pub fn new(group: NamedGroup) -> Self {
        Self { group }
    }
}

impl Grants for GroupGrants {
    fn granted(&self, _uid: u32, groups: &[u32]) -> Result<bool, CallerError> {
        Ok(groups.contains(&self.group.gid))
    }

    fn describe(&self) -> String {
        format!("members of group `{}`", self.group.name)
    }
}

/// The users `corral grant` recorded in corral's database (and did not
/// revoke since).
#[derive(Debug, Clone)]
pub struct StoreGrants(pub Arc<crate::Store>);

impl Grants for StoreGrants {
    fn granted(&self, uid: u32, _groups: &[u32]) -> Result<bool, CallerError> {
        self.0
            .grant_of(uid)
            .map(|g| g.is_some_and(|g| g.active()))
            .map_err(|e| CallerError::Grants(crate::error::chain(&e)))
    }

    fn describe(&self) -> String {
        "the users `corral grant` named".to_owned()
    }
}

/// Granted by any of several sources.
#[derive(Debug, Clone)]
pub struct AnyGrants(pub Vec<Arc<dyn Grants>>);

impl Grants for AnyGrants {
    fn granted(&self, uid: u32, groups: &[u32]) -> Result<bool, CallerError> {
        for g in &self.0 {
            if g.granted(uid, groups)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn describe(&self) -> String {
        if self.0.is_empty() {
            return NoGrants.describe();
        }
        let parts: Vec<String> = self.0.iter().map(|g| g.describe()).collect();
        parts.join(" and ")
    }
}

/// A group, by name and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedGroup {
    /// Its name.
    pub name: String,
    /// Its id.
    pub gid: u32,
}

impl NamedGroup {
    /// Look `name` up in the group database.
    pub fn lookup(name: &str) -> Result<Self, CallerError> {
        let group = Group::from_name(name)
            .map_err(|source| CallerError::Lookup {
                what: format!("group `{name}`"),
                source,
            })?
            .ok_or_else(|| CallerError::NoSuchGroup(name.to_owned()))?;
        Ok(Self {
            name: group.name,
            gid: group.gid.as_raw(),
        })
    }
}

/// The rule that sorts callers into tiers.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    admin_group: Option<NamedGroup>,
    grants: Arc<dyn Grants>,
}

impl AccessPolicy {
    /// Root and members of `admin_group` are admins; `grants` names the
    /// restricted users.
    pub fn new(admin_group: Option<NamedGroup>, grants: Arc<dyn Grants>) -> Self {
        Self {
            admin_group,
            grants,
        }
    }

    /// The same policy, also granting the users `more` names.
    pub fn also_granting(self, more: Arc<dyn Grants>) -> Self {
        let grants: Arc<dyn Grants> = if !self.grants.may_grant() {
            more
        } else {
            Arc::new(AnyGrants(vec![more, self.grants]))
        };
        Self { grants, ..self }
    }

    /// Only root is an admin and nobody else may call.
    pub fn root_only() -> Self {
        Self::new(None, Arc::new(NoGrants))
    }

    /// The tier of user `uid` with primary group `gid`. Group membership
    /// is read from the user database on every call, so a change (a user
    /// added to the admin group, a grant revoked) holds at once.
    pub fn classify(&self, uid: u32, gid: u32) -> Result<Caller, CallerError> {
        let tier = if uid == 0 {
            Tier::Admin
        } else {
            let groups = groups_of(uid, gid)?;
            if self
                .admin_group
                .as_ref()
                .is_some_and(|g| groups.contains(&g.gid))
            {
                Tier::Admin
            } else if self.grants.granted(uid, &groups)? {
                Tier::Restricted
            } else {
                Tier::None
            }
        };
        Ok(Caller { uid, gid, tier })
    }

    /// Who is an admin and who is granted, for a refusal's message.
    pub fn describe(&self) -> String {
        let admins = match &self.admin_group {
            Some(g) => format!("root and members of group `{}`", g.name),
            None => "root".to_owned(),
        };
        format!(
            "admins are {admins}; sandbox rights are granted to {}",
            self.grants.describe()
        )
    }
}

/// Every group `uid` belongs to: `gid`, plus the user database's list when
/// the user has an entry (a uid without one has only its primary group).
pub fn groups_of(uid: u32, gid: u32) -> Result<Vec<u32>, CallerError> {
    let user = User::from_uid(Uid::from_raw(uid)).map_err(|source| CallerError::Lookup {
        what: format!("uid {uid}"),
        source,
    })?;
    let Some(user) = user else {
        return Ok(vec![gid]);
    };
    let Ok(name) = std::ffi::CString::new(user.name.clone()) else {
        return Ok(vec![gid]);
    };
    let mut groups: Vec<u32> = nix::unistd::getgrouplist(&name, Gid::from_raw(gid))
        .map_err(|source| CallerError::Lookup {
            what: format!("the groups of `{}`", user.name),
            source,
        })?
        .into_iter()
        .map(Gid::as_raw)
        .collect();
    if !groups.contains(&gid) {
        groups.push(gid);
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Listed(Vec<u32>);

    impl Grants for Listed {
        fn granted(&self, uid: u32, _groups: &[u32]) -> Result<bool, CallerError> {
            Ok(self.0.contains(&uid))
        }
        fn describe(&self) -> String {
            "the listed users".into()
        }
    }

    #[test]
    fn root_is_admin_granted_users_are_restricted_everyone_else_none() {
        let policy = AccessPolicy::new(None, Arc::new(Listed(vec![4242])));
        assert_eq!(policy.classify(0, 0).unwrap().tier, Tier::Admin);
        // Uids without a passwd entry still classify (their primary group only).
        assert_eq!(policy.classify(4242, 4242).unwrap().tier, Tier::Restricted);
        assert_eq!(policy.classify(4243, 4243).unwrap().tier, Tier::None);
        assert!(policy.describe().contains("the listed users"));
    }

    #[test]
    fn the_admin_group_and_the_users_group_go_by_membership() {
        let admins = NamedGroup {
            name: "ops".into(),
            gid: 5000,
        };
        let users = NamedGroup {
            name: "corral".into(),
            gid: 5001,
        };
        let policy = AccessPolicy::new(Some(admins), Arc::new(GroupGrants::new(users)));
        // A uid with no passwd entry: its primary group decides.
        assert_eq!(policy.classify(61000, 5000).unwrap().tier, Tier::Admin);
        assert_eq!(policy.classify(61000, 5001).unwrap().tier, Tier::Restricted);
        assert_eq!(policy.classify(61000, 5002).unwrap().tier, Tier::None);
        assert!(policy.describe().contains("group `ops`"));
        assert!(policy.describe().contains("group `corral`"));
    }

    #[test]
    fn store_grants_hold_until_revoked_and_any_grants_joins_sources() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(crate::Store::open(&dir.path().join("s")).unwrap());
        let at = corral_sandbox_core::verify::Timestamp(1);
        store.grant(61001, "u", "corral-u-u", at).unwrap();
        let grants = AnyGrants(vec![
            Arc::new(StoreGrants(Arc::clone(&store))),
            Arc::new(GroupGrants::new(NamedGroup {
                name: "corral".into(),
                gid: 5001,
            })),
        ]);
        let policy = AccessPolicy::new(None, Arc::new(grants));
        assert_eq!(
            policy.classify(61001, 61001).unwrap().tier,
            Tier::Restricted
        );
        assert_eq!(policy.classify(61002, 5001).unwrap().tier, Tier::Restricted);
        assert_eq!(policy.classify(61002, 61002).unwrap().tier, Tier::None);
        // A revoke holds at the next request.
        store.revoke(61001, at).unwrap();
        assert_eq!(policy.classify(61001, 61001).unwrap().tier, Tier::None);
        assert!(policy.describe().contains("corral grant"));
        assert!(policy.describe().contains("group `corral`"));
    }

    #[test]
    fn restricted_callers_act_on_their_own_sandboxes_only() {
        let me = Caller {
            uid: 7,
            gid: 7,
            tier: Tier::Restricted,
        };
        assert!(me.may_act_on(Some(7)));
        assert!(!me.may_act_on(Some(8)));
        assert!(!me.may_act_on(None));
        assert!(Caller::admin(0, 0).may_act_on(None));
        let nobody = Caller {
            tier: Tier::None,
            ..me
        };
        assert!(!nobody.may_act_on(Some(7)));
    }

    #[test]
    fn groups_come_from_the_user_database() {
        // root exists everywhere and belongs to group 0.
        assert!(groups_of(0, 0).unwrap().contains(&0));
        assert!(NamedGroup::lookup("root").is_ok_and(|g| g.gid == 0));
        assert!(matches!(
            NamedGroup::lookup("corral-no-such-group-x"),
            Err(CallerError::NoSuchGroup(_))
        ));
    }
}
