//! `corral profiles`: the configured network profiles as a table or JSON.

use corral_sandbox_core::config::{Config, Phase};
use corral_sandbox_core::{EgressMode, Profile};
use serde::Serialize;

use crate::args::ProfilesArgs;
use crate::error::{CmdResult, Outcome};
use crate::load;
use crate::output::{Output, Table, print_json};

/// `corral profiles --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
pub struct ProfilesReport {
    schema: &'static str,
    source: String,
    profiles: Vec<ProfileView>,
}

/// One profile, with allow entries in their text form.
#[derive(Debug, Serialize)]
pub struct ProfileView {
    name: String,
    bridge: String,
    subnet: String,
    subnet_v6: Option<String>,
    gateway: String,
    mode: EgressMode,
    allow: Vec<String>,
    block: corral_sandbox_core::BlockAction,
    dns: corral_sandbox_core::DnsPolicy,
    allow_unresolved: bool,
    phases: Vec<&'static str>,
}

impl ProfileView {
    /// The view of `profile` within `config` (which phases use it).
    pub fn new(profile: &Profile, config: &Config) -> Self {
        Self {
            name: profile.name.to_string(),
            bridge: profile.bridge.to_string(),
            subnet: profile.subnet_v4.to_string(),
            subnet_v6: profile.subnet_v6.map(|n| n.to_string()),
            gateway: profile.gateway_v4().to_string(),
            mode: profile.mode,
            allow: profile.allow.iter().map(ToString::to_string).collect(),
            block: profile.block,
            dns: profile.dns,
            allow_unresolved: profile.allow_unresolved,
            phases: Phase::ALL
                .into_iter()
                .filter(|p| config.phases.name_for(*p) == Some(&profile.name))
                .map(Phase::key)
                .collect(),
        }
    }
}

fn mode_name(mode: EgressMode) -> &'static str {
    match mode {
        EgressMode::None => "none",
        EgressMode::Internet => "internet",
        EgressMode::Allowlist => "allowlist",
    }
}

/// Print the profiles.
pub fn run(args: &ProfilesArgs, out: Output) -> CmdResult {
    let loaded = load::load(&args.source)?;
    let views: Vec<ProfileView> = loaded
        .config
        .profiles
        .iter()
        .map(|p| ProfileView::new(p, &loaded.config))
        .collect();
    if args.json {
        print_json(&ProfilesReport {
            schema: "corral.profiles.v1",
            source: loaded.origin.to_string(),
            profiles: views,
        })?;
        return Ok(Outcome::Ok);
    }
    out.info(&format!("profiles from {}", loaded.origin));
    let mut table = Table::new([
        "profile", "bridge", "subnet", "ipv6", "mode", "allow", "block", "phases",
    ]);
    for v in &views {
        table.row([
            v.name.clone(),
            v.bridge.clone(),
            v.subnet.clone(),
            v.subnet_v6.clone().unwrap_or_else(|| "-".to_owned()),
            mode_name(v.mode).to_owned(),
            if v.allow.is_empty() {
                "-".to_owned()
            } else {
                v.allow.join(", ")
            },
            format!("{:?}", v.block).to_lowercase(),
            if v.phases.is_empty() {
                "-".to_owned()
            } else {
                v.phases.join(", ")
            },
        ]);
    }
    out.table(&table, true);
    Ok(Outcome::Ok)
}
