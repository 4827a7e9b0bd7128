//! Forwarding throughput, sandbox → internet, inside network namespaces:
//! no firewall vs corral (10k-entry allowlist in sets) vs a one-rule-per-
//! address chain as the reference design writes it vs conntrack and
//! masquerade alone, no filtering (the fixed cost any stateful NAT design
//! pays; the baselines are loaded with `nft -f`, which only a baseline may
//! use), and two variants of corral's own plan in the same run: its
//! profile chains as they were before issue 26's classes 11 and 12, and
//! without class 12's flow limits, and the ablations of issue 26's rules
//! one at a time (without the `ct count` meter, without the rate meter,
//! without the loose-pickup drop, without the own-flow checks), so what
//! each new rule costs is a ratio measured against the others in one run.
//!
//! `SETUPS` (comma-separated keys, see `SETUP_KEYS`; no firewall is always
//! measured, first, as the ratios' denominator) and `ROUNDS` (default 5)
//! pick what runs, so a run fits the time there is.
//!
//! Two workloads: one bulk TCP stream for a fixed time (per-packet cost of
//! established traffic), and the median time to open a new TCP connection
//! to the LAST allowlisted address (per-new-flow cost, where a linear chain
//! walks every rule). Each figure is the median of `ROUNDS` interleaved
//! rounds. Needs root; run with
//! `cargo bench -p corral-egress --bench throughput`.

use corral_drill::attack::related::without_own_flow;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use corral_drill::lab::Lab;
use corral_egress::netns::Netns;
use corral_egress::plan::{HostPlan, Match, Verdict};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use corral_test_support::bench::{self, median};

const ENTRIES: usize = 10_000;
/// Rounds unless `ROUNDS` says otherwise.
const RUNS: usize = 5;
const BULK: Duration = Duration::from_secs(2);
const CONNECTS: usize = 200;
const TARGET: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);
const PORT: u16 = 5201;
/// The far end of every forwarding measurement (`bench::sink`).
const SINK: SocketAddr = SocketAddr::new(IpAddr::V4(TARGET), PORT);
const BRIDGE: &str = "cb-bench";

/// The n-th filler address: public-looking, never the target.
fn filler(i: usize) -> Ipv4Addr {
    // 10k addresses spread over 45.0.0.0/16 .. with gaps so none merge.
    let i = u32::try_from(i).unwrap_or(0);
    Ipv4Addr::from(u32::from(Ipv4Addr::new(45, 0, 0, 0)) + i * 2 + 1)
}

fn config() -> Config {
    let mut allow: Vec<String> = (0..ENTRIES - 1)
        .map(|i| format!("\"{}:443/tcp\"", filler(i)))
        .collect();
    // The destination comes last: the worst case for a linear chain.
    allow.push(format!("\"{TARGET}:{PORT}/tcp\""));
    let text = format!(
        "[[profile]]\nname = \"bench\"\nbridge = \"{BRIDGE}\"\nsubnet = \"10.240.0.0/24\"\nmode = \"allowlist\"\nallow = [{}]\n",
        allow.join(", ")
    );
    match Config::from_toml_str(&text, "bench") {
        Ok(c) => c,
        Err(e) => panic!("bench config: {e}"),
    }
}

/// The reference design's shape: per-bridge chain, established first, one
/// `ip daddr … accept` rule per allowed address, then drop.
fn linear_ruleset() -> String {
    let mut s = String::from(
        "table inet refbench {\n chain refforward {\n  type filter hook forward priority 0; policy accept;\n",
    );
    s.push_str(&format!(
        "  iifname \"{BRIDGE}\" jump cb-bench\n }}\n chain cb-bench {{\n"
    ));
    s.push_str("  ct state established,related accept\n");
    for i in 0..ENTRIES - 1 {
        s.push_str(&format!("  ip daddr {} tcp dport 443 accept\n", filler(i)));
    }
    s.push_str(&format!(
        "  ip daddr {TARGET} tcp dport {PORT} accept\n  counter drop\n }}\n}}\n"
    ));
    s
}

/// Conntrack and masquerade, nothing else: what every new flow costs a
/// design that tracks flows and NATs the sandboxes, before any rule.
fn nat_only_ruleset() -> String {
    format!(
        "table inet natbench {{\n chain f {{\n  type filter hook forward priority 0; policy accept;\n  ct state established,related accept\n }}\n chain p {{\n  type nat hook postrouting priority 100; policy accept;\n  ip saddr 10.240.0.0/24 oifname != \"{BRIDGE}\" masquerade\n }}\n}}\n"
    )
}

fn nft_f(ns: &Netns, script: &str) {
    let mut cmd = Command::new("nft");
    cmd.args(["-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ns
        .spawn(cmd)
        .unwrap_or_else(|e| panic!("cannot run nft: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .unwrap_or_else(|e| panic!("nft stdin: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("nft: {e}"));
    assert!(
        out.status.success(),
        "nft -f failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The setups, re-configured before every measurement so that they
/// interleave (A B C A B C …): a noisy shared machine then biases none of
/// them.
#[derive(Clone, Copy)]
enum Setup {
    None,
    Corral,
    /// corral's plan with its profile chains as they were before issue 26's
    /// classes 11 and 12 (see [`before_26`]).
    CorralBefore26,
    /// corral's plan without class 12's rules only.
    CorralNoFlowLimits,
    /// corral's plan without the per-source `ct count` meter.
    CorralNoCount,
    /// corral's plan without the per-source rate meter.
    CorralNoRate,
    /// corral's plan without the guard's loose-pickup (`tcp flags`) drop.
    CorralNoLoose,
    /// corral's plan without class 11's own-flow checks (one plain
    /// `ct state established,related` accept per chain), class 12 kept.
    CorralNoOwnFlow,
    /// corral's plan with the match order issue 26 first had (see
    /// [`first_layout`]).
    CorralFirstLayout,
    /// corral's plan with the bridge table's chains emptied (every policy
    /// is accept): what the L2 bindings cost, for comparison.
    CorralNoBridge,
    /// corral's plan with the prerouting guard and arrival chains emptied:
    /// what the guard costs, for comparison.
    CorralNoGuard,
    /// corral's plan as before issue 26 with the guard, the arrival chains
    /// and the bridge table all emptied: the profile chains (vmap dispatch,
    /// set lookups, fail-closed drops) and the NAT, nothing else.
    CorralNoLayers,
    Linear,
    NatOnly,
}

/// `plan` without the rules `drop` names, in every chain.
fn without(plan: &HostPlan, drop: impl Fn(&Match) -> bool) -> HostPlan {
    let mut p = plan.clone();
    for c in &mut p.inet.chains {
        c.rules.retain(|r| !r.matches.iter().any(&drop));
    }
    p
}

/// The per-source meters of class 12 (`<p>-flows4`, `<p>-newflows6`, …),
/// not the host chain's DNS meters nor the drop log's.
fn flow_meter(m: &Match, rate: bool) -> bool {
    let Match::Meter { set, .. } = m else {
        return false;
    };
    let newflows = set.ends_with("-newflows4") || set.ends_with("-newflows6");
    let flows = !newflows && (set.ends_with("-flows4") || set.ends_with("-flows6"));
    if rate { newflows } else { flows }
}

/// `plan` without class 12's rules: no loose-pickup drop, no per-source
/// count or rate.
fn without_flow_limits(plan: &HostPlan) -> HostPlan {
    without(plan, |m| {
        matches!(m, Match::TcpNotSyn) || flow_meter(m, true) || flow_meter(m, false)
    })
}

/// `plan` with the match order issue 26's rules first had: the loose-pickup
/// drop tested the TCP flags before `ct state new`, and the foreign-related
/// drops tested `ct state related` after their source-set lookup, so every
/// established packet paid for both tests (twice: each drop has its
/// drop-log twin).
fn first_layout(plan: &HostPlan) -> HostPlan {
    let mut p = plan.clone();
    for c in p.inet.chains.iter_mut().filter(|c| c.profile.is_some()) {
        for r in &mut c.rules {
            if r.matches.first() == Some(&Match::CtNew) && r.matches.contains(&Match::TcpNotSyn) {
                r.matches.retain(|m| *m != Match::CtNew);
                let at = r
                    .matches
                    .iter()
                    .position(|m| *m == Match::TcpNotSyn)
                    .map_or(0, |i| i + 1);
                r.matches.insert(at, Match::CtNew);
            } else if r.verdict != Verdict::Accept && r.matches.first() == Some(&Match::CtRelated) {
                let m = r.matches.remove(0);
                let at = r
                    .matches
                    .iter()
                    .position(|m| !matches!(m, Match::SaddrInSet(..)))
                    .unwrap_or(r.matches.len());
                r.matches.insert(at, m);
            }
        }
    }
    p
}

/// `plan` with every chain of `table` whose name `pick` takes emptied.
/// The guard's chains: the shared guard, each profile's own part and its
/// arrival check.
fn guard_chain(n: &str) -> bool {
    n == corral_egress::plan::names::SHARED_GUARD
        || n.ends_with("-guard")
        || n.ends_with("-arrival")
}

fn emptied(plan: &HostPlan, bridge: bool, pick: impl Fn(&str) -> bool) -> HostPlan {
    let mut p = plan.clone();
    let t = if bridge { &mut p.bridge } else { &mut p.inet };
    for c in t.chains.iter_mut().filter(|c| pick(&c.name)) {
        c.rules.clear();
    }
    p
}

/// `plan` as main had it before classes 11 and 12.
fn before_26(plan: &HostPlan) -> HostPlan {
    without_own_flow(&without_flow_limits(plan))
}

/// The plans of the corral variants, built once.
struct Variants {
    before_26: HostPlan,
    no_flow_limits: HostPlan,
    no_count: HostPlan,
    no_rate: HostPlan,
    no_loose: HostPlan,
    no_own_flow: HostPlan,
    first_layout: HostPlan,
    no_bridge: HostPlan,
    no_guard: HostPlan,
    no_layers: HostPlan,
}

impl Variants {
    fn new(plan: &HostPlan) -> Self {
        let v = Self {
            before_26: before_26(plan),
            no_flow_limits: without_flow_limits(plan),
            no_count: without(plan, |m| flow_meter(m, false)),
            no_rate: without(plan, |m| flow_meter(m, true)),
            no_loose: without(plan, |m| matches!(m, Match::TcpNotSyn)),
            no_own_flow: without_own_flow(plan),
            first_layout: first_layout(plan),
            no_bridge: emptied(plan, true, |_| true),
            no_guard: emptied(plan, false, guard_chain),
            no_layers: emptied(
                &emptied(&before_26(plan), true, |_| true),
                false,
                guard_chain,
            ),
        };
        // A transform that no longer finds its rules (a renamed set, a
        // moved rule) would measure the full plan under another name.
        for (name, p) in [
            ("before issue 26", &v.before_26),
            ("without flow limits", &v.no_flow_limits),
            ("without ct count", &v.no_count),
            ("without the rate meter", &v.no_rate),
            ("without loose pickup", &v.no_loose),
            ("without own-flow checks", &v.no_own_flow),
            ("first layout", &v.first_layout),
            ("without the bridge table", &v.no_bridge),
            ("without the guard", &v.no_guard),
            ("without the layers", &v.no_layers),
        ] {
            assert!(
                p.inet != plan.inet || p.bridge != plan.bridge,
                "the variant {name} changes nothing in the plan"
            );
        }
        v
    }
}

const DROP_LINEAR: &str = "add table inet refbench\ndelete table inet refbench\nadd table inet natbench\ndelete table inet natbench\n";

fn configure(lab: &Lab, setup: Setup, variants: &Variants) {
    let host = &lab.topo.host;
    let drop_corral = || {
        host.run(corral_egress::nft::delete_tables)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("delete tables: {e}"));
    };
    match setup {
        Setup::None => {
            drop_corral();
            nft_f(host, DROP_LINEAR);
        }
        Setup::Corral => {
            nft_f(host, DROP_LINEAR);
            lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
        }
        Setup::CorralBefore26
        | Setup::CorralNoFlowLimits
        | Setup::CorralNoCount
        | Setup::CorralNoRate
        | Setup::CorralNoLoose
        | Setup::CorralNoOwnFlow
        | Setup::CorralFirstLayout
        | Setup::CorralNoBridge
        | Setup::CorralNoGuard
        | Setup::CorralNoLayers => {
            nft_f(host, DROP_LINEAR);
            let plan = match setup {
                Setup::CorralBefore26 => &variants.before_26,
                Setup::CorralNoCount => &variants.no_count,
                Setup::CorralNoRate => &variants.no_rate,
                Setup::CorralNoLoose => &variants.no_loose,
                Setup::CorralNoOwnFlow => &variants.no_own_flow,
                Setup::CorralFirstLayout => &variants.first_layout,
                Setup::CorralNoBridge => &variants.no_bridge,
                Setup::CorralNoGuard => &variants.no_guard,
                Setup::CorralNoLayers => &variants.no_layers,
                _ => &variants.no_flow_limits,
            };
            lab.host
                .apply(plan)
                .unwrap_or_else(|e| panic!("apply: {e}"));
        }
        Setup::Linear => {
            drop_corral();
            nft_f(host, &format!("{DROP_LINEAR}{}", linear_ruleset()));
        }
        Setup::NatOnly => {
            drop_corral();
            nft_f(host, &format!("{DROP_LINEAR}{}", nat_only_ruleset()));
        }
    }
}

/// Every setup: its `SETUPS` key, its label, the setup. No firewall is
/// first: the ratios' denominator.
const SETUP_KEYS: [(&str, &str, Setup); 14] = [
    ("none", "no firewall", Setup::None),
    ("corral", "corral, 10k-entry sets", Setup::Corral),
    (
        "before26",
        "corral before issue 26 (classes 11, 12)",
        Setup::CorralBefore26,
    ),
    (
        "noflowlimits",
        "corral without class 12's flow limits",
        Setup::CorralNoFlowLimits,
    ),
    (
        "nocount",
        "corral without the ct count meter",
        Setup::CorralNoCount,
    ),
    (
        "norate",
        "corral without the rate meter",
        Setup::CorralNoRate,
    ),
    (
        "noloose",
        "corral without the loose-pickup drop",
        Setup::CorralNoLoose,
    ),
    (
        "noownflow",
        "corral without the own-flow checks",
        Setup::CorralNoOwnFlow,
    ),
    (
        "firstlayout",
        "corral, issue 26's first match order",
        Setup::CorralFirstLayout,
    ),
    (
        "nobridge",
        "corral without the bridge table's rules",
        Setup::CorralNoBridge,
    ),
    (
        "noguard",
        "corral without the prerouting guard",
        Setup::CorralNoGuard,
    ),
    (
        "nolayers",
        "corral's profile chains only (no guard, no bridge table, before issue 26)",
        Setup::CorralNoLayers,
    ),
    ("linear", "one rule per address (10k rules)", Setup::Linear),
    ("natonly", "conntrack + masquerade only", Setup::NatOnly),
];

/// The setups `SETUPS` names (all when unset), no firewall always first.
fn chosen_setups() -> Vec<(&'static str, Setup)> {
    let wanted = std::env::var("SETUPS").ok();
    let keys: Option<Vec<&str>> = wanted.as_deref().map(|w| {
        w.split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .collect()
    });
    if let Some(keys) = &keys
        && let Some(bad) = keys
            .iter()
            .find(|k| !SETUP_KEYS.iter().any(|(key, _, _)| key == *k))
    {
        let known: Vec<&str> = SETUP_KEYS.iter().map(|(k, _, _)| *k).collect();
        panic!(
            "SETUPS: unknown setup {bad:?}; expected some of {}",
            known.join(",")
        );
    }
    SETUP_KEYS
        .iter()
        .filter(|(key, _, _)| *key == "none" || keys.as_ref().is_none_or(|k| k.contains(key)))
        .map(|(_, name, setup)| (*name, *setup))
        .collect()
}

/// `ROUNDS`, or [`RUNS`].
fn rounds() -> usize {
    match std::env::var("ROUNDS") {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => panic!("ROUNDS: expected a whole number of rounds above 0, got {v:?}"),
        },
        Err(_) => RUNS,
    }
}

fn main() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = config();
    let lab = Lab::without_endpoints(&cfg.profiles, &Resolution::new())
        .unwrap_or_else(|e| panic!("lab: {e}"));
    lab.control().unwrap_or_else(|e| panic!("control: {e}"));
    lab.topo
        .internet
        .run(|| bench::sink(SINK))
        .and_then(|r| r)
        .unwrap_or_else(|e| panic!("sink: {e}"));
    let sb = &lab.sandbox("bench").ns;
    let variants = Variants::new(&lab.plan);
    let setups = chosen_setups();
    let rounds = rounds();
    println!(
        "forwarding sandbox -> internet, {ENTRIES} allowlisted addresses, median of {rounds} interleaved rounds"
    );
    let mut gbit = vec![Vec::new(); setups.len()];
    let mut conn = vec![Vec::new(); setups.len()];
    for round in 0..rounds {
        for (i, (name, setup)) in setups.iter().enumerate() {
            configure(&lab, *setup, &variants);
            let (g, c) = sb
                .run(|| bench::forwarding(SINK, BULK, CONNECTS))
                .and_then(|r| r)
                .unwrap_or_else(|e| panic!("forwarding: {e}"));
            println!("round {round} {name:<42} {g:>6.2} Gbit/s {c:>8.0} µs/connect");
            gbit[i].push(g);
            conn[i].push(c);
        }
    }
    let g: Vec<f64> = gbit.into_iter().map(median).collect();
    let c: Vec<f64> = conn.into_iter().map(median).collect();
    println!();
    // The second pair of ratios is against conntrack + masquerade alone
    // (the floor of any stateful NAT design), when it ran.
    let floor = setups.iter().position(|(_, s)| matches!(s, Setup::NatOnly));
    println!(
        "| setup | bulk TCP Gbit/s | ratio | new-connection latency µs | ratio | bulk / connect vs conntrack + masquerade |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, (name, _)) in setups.iter().enumerate() {
        let vs_floor = floor.map_or_else(
            || "—".to_owned(),
            |f| format!("{:.2} / {:.2}", g[i] / g[f], c[i] / c[f]),
        );
        println!(
            "| {name} | {:.2} | {:.2} | {:.0} | {:.2} | {vs_floor} |",
            g[i],
            g[i] / g[0],
            c[i],
            c[i] / c[0]
        );
    }
}
