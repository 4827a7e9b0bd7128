//! `corral profiles`: the configured network profiles as a table or JSON.

use corral_sandbox_core::EgressMode;
use corral_service::reports::ProfilesReport;

use crate::args::ProfilesArgs;
use crate::error::{CmdResult, Outcome};
use crate::load;
use crate::output::{Output, Table, print_json};

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
    let report = ProfilesReport::new(&loaded.config, loaded.origin.to_string());
    if args.json {
        print_json(&report)?;
        return Ok(Outcome::Ok);
    }
    let views = &report.profiles;
    out.info(&format!("profiles from {}", loaded.origin));
    let mut table = Table::new([
        "profile", "bridge", "subnet", "ipv6", "mode", "allow", "block", "phases",
    ]);
    for v in views {
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
