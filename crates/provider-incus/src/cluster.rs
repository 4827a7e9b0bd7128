//! An Incus cluster as corral sees it: its members and their state as
//! Incus reports them, and which of them may take a new sandbox. Incus
//! does the clustering (membership, database, scheduling); corral only
//! reads the member list and refuses a target Incus itself would not place
//! work on.

use std::fmt;

use corral_sandbox_core::sandbox::ProviderError;
use serde::{Deserialize, Serialize};

use crate::client::encode_query;
use crate::provider::IncusProvider;

/// `GET /1.0/cluster`: whether the server is a cluster member at all.
#[derive(Debug, Clone, Deserialize)]
struct ClusterInfo {
    #[serde(default)]
    enabled: bool,
}

/// `GET /1.0`: the member that answered (on a member's own socket, that
/// member).
#[derive(Debug, Clone, Deserialize)]
struct ServerInfo {
    #[serde(default)]
    environment: ServerEnvironment,
}

impl ServerInfo {
    /// A standalone server also names itself: only a cluster member is one.
    fn member(self) -> Option<String> {
        let env = self.environment;
        (env.server_clustered && !env.server_name.is_empty()).then_some(env.server_name)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ServerEnvironment {
    #[serde(default)]
    server_name: String,
    #[serde(default)]
    server_clustered: bool,
}

/// One member, as `GET /1.0/cluster/members?recursion=1` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMember {
    /// The member's name (`server_name`), what `target=` takes.
    #[serde(rename = "server_name")]
    pub name: String,
    /// Its cluster address (`https://ADDR:8443`).
    #[serde(default)]
    pub url: String,
    /// `Online`, `Evacuated`, `Offline`, `Blocked`…
    #[serde(default)]
    pub status: String,
    /// Incus's explanation (`Fully operational`, `No heartbeat for …`).
    #[serde(default)]
    pub message: String,
    /// Database roles and the like.
    #[serde(default)]
    pub roles: Vec<String>,
}

impl ClusterMember {
    /// Incus places new instances only on online members.
    pub fn takes_work(&self) -> bool {
        self.status.eq_ignore_ascii_case("online")
    }
}

impl fmt::Display for ClusterMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}: {})", self.name, self.status, self.message)
    }
}

/// Why `target` may not take a new sandbox, or `Ok` when it may.
/// `members` is `None` when the server is not clustered.
pub fn check_target(members: Option<&[ClusterMember]>, target: &str) -> Result<(), ProviderError> {
    let Some(members) = members else {
        return Err(ProviderError::InvalidSpec {
            field: "target",
            reason: format!(
                "`{target}` names a cluster member, but this Incus server is not part of a cluster; leave the target out"
            ),
        });
    };
    let Some(member) = members.iter().find(|m| m.name == target) else {
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        return Err(ProviderError::InvalidSpec {
            field: "target",
            reason: format!(
                "`{target}` is not a member of this cluster; members: {}",
                names.join(", ")
            ),
        });
    };
    if member.takes_work() {
        return Ok(());
    }
    let hint = if member.status.eq_ignore_ascii_case("evacuated") {
        format!("`incus cluster restore {target}` brings it back")
    } else {
        "pick an online member, or leave the target out and let Incus place it".to_owned()
    };
    Err(ProviderError::InvalidSpec {
        field: "target",
        reason: format!(
            "cluster member `{target}` is {} ({}), and Incus places no new instance there; {hint}",
            member.status.to_lowercase(),
            member.message
        ),
    })
}

impl IncusProvider {
    /// The cluster's members, or `None` when the server is not clustered.
    pub async fn members(&self) -> Result<Option<Vec<ClusterMember>>, ProviderError> {
        let info: ClusterInfo = self
            .inner
            .client
            .get("/1.0/cluster")
            .await
            .map_err(|e| self.err(e))?;
        if !info.enabled {
            return Ok(None);
        }
        let members: Vec<ClusterMember> = self
            .inner
            .client
            .get("/1.0/cluster/members?recursion=1")
            .await
            .map_err(|e| self.err(e))?;
        Ok(Some(members))
    }

    /// The member this connection's daemon is (`GET /1.0`'s
    /// `server_name`), or `None` when the server is not clustered. The
    /// host side of a sandbox placed there is on that member's kernel.
    pub async fn local_member(&self) -> Result<Option<String>, ProviderError> {
        let info: ServerInfo = self
            .inner
            .client
            .get("/1.0")
            .await
            .map_err(|e| self.err(e))?;
        Ok(info.member())
    }

    /// The create URL: `/1.0/instances`, with `target=` once the member
    /// is checked to take work.
    pub(crate) async fn create_path(&self, target: Option<&str>) -> Result<String, ProviderError> {
        let Some(target) = target else {
            return Ok("/1.0/instances".to_owned());
        };
        let members = self.members().await?;
        check_target(members.as_deref(), target)?;
        Ok(format!("/1.0/instances?target={}", encode_query(target)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_member_is_named_only_on_a_cluster() {
        let info = |json: &str| serde_json::from_str::<ServerInfo>(json).unwrap().member();
        assert_eq!(
            info(
                r#"{"environment":{"server_name":"m2","server_clustered":true,"kernel":"Linux"}}"#
            ),
            Some("m2".into())
        );
        assert_eq!(
            info(r#"{"environment":{"server_name":"host","server_clustered":false}}"#),
            None
        );
        assert_eq!(info(r#"{"api_status":"stable"}"#), None);
    }

    fn member(name: &str, status: &str, message: &str) -> ClusterMember {
        ClusterMember {
            name: name.into(),
            url: format!("https://{name}:8443"),
            status: status.into(),
            message: message.into(),
            roles: Vec::new(),
        }
    }

    #[test]
    fn incus_member_records_parse() {
        // As Incus 6.0.4 answers `GET /1.0/cluster/members?recursion=1`.
        let body = r#"[{"roles":["database-leader","database"],"failure_domain":"default","description":"","config":{},"groups":["default"],"server_name":"m1","url":"https://10.231.0.1:8443","database":true,"status":"Online","message":"Fully operational","architecture":"x86_64"}]"#;
        let members: Vec<ClusterMember> = serde_json::from_str(body).unwrap();
        assert_eq!(members[0].name, "m1");
        assert_eq!(members[0].url, "https://10.231.0.1:8443");
        assert!(members[0].takes_work());
    }

    #[test]
    fn an_online_member_is_a_target() {
        let ms = [member("m1", "Online", "Fully operational")];
        assert!(check_target(Some(&ms), "m1").is_ok());
    }

    #[test]
    fn evacuated_and_offline_members_are_refused_with_what_to_do() {
        let ms = [
            member("m1", "Evacuated", "Unavailable due to maintenance"),
            member("m2", "Offline", "No heartbeat for 30s"),
        ];
        let e = check_target(Some(&ms), "m1").unwrap_err().to_string();
        assert!(
            e.contains("evacuated") && e.contains("incus cluster restore m1"),
            "{e}"
        );
        let e = check_target(Some(&ms), "m2").unwrap_err().to_string();
        assert!(e.contains("offline") && e.contains("No heartbeat"), "{e}");
    }

    #[test]
    fn unknown_members_and_unclustered_servers_are_refused() {
        let ms = [member("m1", "Online", ""), member("m2", "Online", "")];
        let e = check_target(Some(&ms), "m3").unwrap_err().to_string();
        assert!(e.contains("members: m1, m2"), "{e}");
        let e = check_target(None, "m1").unwrap_err().to_string();
        assert!(e.contains("not part of a cluster"), "{e}");
    }
}
