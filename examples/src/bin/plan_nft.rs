//! Load a `corral.toml` (or the built-in defaults) and print the nftables
//! ruleset corral would install for it, without touching the host.
//!
//! ```text
//! cargo run -p corral-examples --bin plan_nft                      # built-in defaults
//! cargo run -p corral-examples --bin plan_nft -- examples/corral.toml
//! cargo run -p corral-examples --bin plan_nft -- FILE --offline    # resolve no names
//! ```
//!
//! The flow is the one every corral front end uses: config text → validated
//! `Config` → names resolved once → `HostPlan` (pure data) → rendering.
//! Applying the plan would be `Host::current()?.apply(&plan)` (root only).

use std::process::ExitCode;

use anyhow::Context;
use corral_egress::host::plan_settings;
use corral_egress::plan::HostPlan;
use corral_egress::resolve::{Resolver, StaticResolver, SystemResolver, resolve_profiles};
use corral_sandbox_core::Config;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plan_nft: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let offline = args.iter().any(|a| a == "--offline");
    let file = args.iter().find(|a| !a.starts_with("--"));

    // 1. Configuration: a file is validated as a whole (every problem is
    //    listed at once) or the built-in profiles are used.
    let config = match file {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
            Config::from_toml_str(&text, path).map_err(|e| anyhow::anyhow!("{e}"))?
        }
        None => Config::builtin_default(),
    };

    // 2. Names in allowlists are resolved once, here, and become set
    //    elements. `--offline` answers nothing for every name (a profile
    //    with `allow_unresolved = false` then refuses, as apply would).
    let resolver: Box<dyn Resolver> = if offline {
        Box::new(StaticResolver::new())
    } else {
        Box::new(SystemResolver)
    };
    let resolution = resolve_profiles(&config.profiles, resolver.as_ref())?;

    // 3. The plan is pure data: the same inputs give the same bytes.
    let plan = HostPlan::build(&config.profiles, &plan_settings(&config.host), &resolution)?;
    println!(
        "# {} profile(s), {} bridge(s), {} rules, {} set elements",
        config.profiles.len(),
        plan.bridges.len(),
        plan.rule_count(),
        plan.element_count()
    );
    for s in &plan.sysctls {
        println!("# sysctl {} = {}  ({})", s.key, s.value, s.reason);
    }
    print!("{}", plan.render_nft());
    Ok(())
}
