//! Forwarding throughput, sandbox → internet, inside network namespaces:
//! no firewall vs corral (10k-entry allowlist in sets) vs a one-rule-per-
//! address chain as the reference design writes it vs conntrack and
//! masquerade alone, no filtering (the fixed cost any stateful NAT design
//! pays; the baselines are loaded with `nft -f`, which only a baseline may
//! use), and two variants of corral's own plan in the same run: its
//! profile chains as they were before issue 26's classes 11 and 12, and
//! without class 12's flow limits, so what each new rule costs is a ratio
//! measured against the others in one run.
//!
//! Two workloads: one bulk TCP stream for a fixed time (per-packet cost of
//! established traffic), and the median time to open a new TCP connection
//! to the LAST allowlisted address (per-new-flow cost, where a linear chain
//! walks every rule). Each figure is the median of `RUNS` runs. Needs root; run with
//! `cargo bench -p corral-egress --bench throughput`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_drill::lab::Lab;
use corral_egress::netns::Netns;
use corral_egress::plan::{CtDir, HostPlan, Match, RulePlan, Verdict};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

const ENTRIES: usize = 10_000;
const RUNS: usize = 5;
const BULK: Duration = Duration::from_secs(2);
const CONNECTS: usize = 200;
const TARGET: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);
const PORT: u16 = 5201;
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

/// A sink that accepts and discards, forever (the process exits at the end).
fn start_sink(internet: &Netns) {
    let listener = internet
        .run(|| TcpListener::bind(SocketAddr::new(IpAddr::V4(TARGET), PORT)))
        .and_then(|r| r)
        .unwrap_or_else(|e| panic!("sink bind: {e}"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
}

fn connect(ns: &Netns) -> TcpStream {
    let to = SocketAddr::new(IpAddr::V4(TARGET), PORT);
    ns.run(|| TcpStream::connect_timeout(&to, Duration::from_secs(2)))
        .and_then(|r| r)
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// Gbit/s of one bulk stream.
fn bulk(ns: &Netns) -> f64 {
    let mut s = connect(ns);
    let buf = vec![0x5au8; 256 * 1024];
    let start = Instant::now();
    let mut sent: u64 = 0;
    while start.elapsed() < BULK {
        match s.write(&buf) {
            Ok(n) => sent += n as u64,
            Err(e) => panic!("bulk write: {e}"),
        }
    }
    sent as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
}

/// Median time to establish a new TCP connection, microseconds, over
/// `CONNECTS` connections (each closed with a reset so no TIME_WAIT builds
/// up). The first packet of a new flow is where a linear chain walks its
/// rules; established packets never get there.
fn connects(ns: &Netns) -> f64 {
    let to = SocketAddr::new(IpAddr::V4(TARGET), PORT);
    let lat = ns
        .run(|| {
            let mut lat = Vec::with_capacity(CONNECTS);
            for _ in 0..CONNECTS {
                let t = Instant::now();
                if let Ok(s) = TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
                    lat.push(t.elapsed().as_secs_f64() * 1e6);
                    let _ = set_linger_zero(&s);
                }
            }
            lat
        })
        .unwrap_or_else(|e| panic!("connects: {e}"));
    assert!(!lat.is_empty(), "no connection succeeded");
    median(lat)
}

fn set_linger_zero(s: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `l` for its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const l).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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
    Linear,
    NatOnly,
}

/// `plan` without class 12's rules: no loose-pickup drop, no per-source
/// count or rate.
fn without_flow_limits(plan: &HostPlan) -> HostPlan {
    let mut p = plan.clone();
    for c in &mut p.inet.chains {
        c.rules.retain(|r| {
            !r.matches.iter().any(|m| match m {
                Match::TcpNotSyn => true,
                Match::Meter { set, .. } => set.contains("flows"),
                _ => false,
            })
        });
    }
    p
}

/// `plan` as main had it before classes 11 and 12: also one
/// `ct state established,related` accept per profile chain (in the chain's
/// direction) instead of the own-flow accepts and the foreign-related drops.
fn before_26(plan: &HostPlan) -> HostPlan {
    let mut p = without_flow_limits(plan);
    for c in p.inet.chains.iter_mut().filter(|c| c.profile.is_some()) {
        let dir = if c.name.ends_with("-out") {
            Some(CtDir::Original)
        } else if c.name.ends_with("-in") {
            Some(CtDir::Reply)
        } else if c.name.ends_with("-host") {
            None
        } else {
            continue;
        };
        c.rules.retain(|r| {
            !r.matches
                .iter()
                .any(|m| matches!(m, Match::CtOrigSaddrIn(_) | Match::CtRelated))
        });
        let mut m = vec![Match::CtEstablishedRelated];
        m.extend(dir.map(Match::CtDirection));
        c.rules.insert(0, RulePlan::counted(m, Verdict::Accept));
    }
    p
}

/// The plans of the corral variants, built once.
struct Variants {
    before_26: HostPlan,
    no_flow_limits: HostPlan,
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
        Setup::CorralBefore26 | Setup::CorralNoFlowLimits => {
            nft_f(host, DROP_LINEAR);
            let plan = match setup {
                Setup::CorralBefore26 => &variants.before_26,
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

fn main() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = config();
    let lab = Lab::without_endpoints(&cfg.profiles, &Resolution::new())
        .unwrap_or_else(|e| panic!("lab: {e}"));
    lab.control().unwrap_or_else(|e| panic!("control: {e}"));
    start_sink(&lab.topo.internet);
    let sb = &lab.sandbox("bench").ns;
    println!(
        "forwarding sandbox -> internet, {ENTRIES} allowlisted addresses, median of {RUNS} interleaved rounds"
    );
    let variants = Variants {
        before_26: before_26(&lab.plan),
        no_flow_limits: without_flow_limits(&lab.plan),
    };
    let setups = [
        ("no firewall", Setup::None),
        ("corral, 10k-entry sets", Setup::Corral),
        (
            "corral before issue 26 (classes 11, 12)",
            Setup::CorralBefore26,
        ),
        (
            "corral without class 12's flow limits",
            Setup::CorralNoFlowLimits,
        ),
        ("one rule per address (10k rules)", Setup::Linear),
        ("conntrack + masquerade only", Setup::NatOnly),
    ];
    let mut gbit = vec![Vec::new(); setups.len()];
    let mut conn = vec![Vec::new(); setups.len()];
    for round in 0..RUNS {
        for (i, (name, setup)) in setups.iter().enumerate() {
            configure(&lab, *setup, &variants);
            let g = bulk(sb);
            let c = connects(sb);
            println!("round {round} {name:<42} {g:>6.2} Gbit/s {c:>8.0} µs/connect");
            gbit[i].push(g);
            conn[i].push(c);
        }
    }
    let g: Vec<f64> = gbit.into_iter().map(median).collect();
    let c: Vec<f64> = conn.into_iter().map(median).collect();
    println!();
    println!("| setup | bulk TCP Gbit/s | ratio | new-connection latency µs | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (i, (name, _)) in setups.iter().enumerate() {
        println!(
            "| {name} | {:.2} | {:.2} | {:.0} | {:.2} |",
            g[i],
            g[i] / g[0],
            c[i],
            c[i] / c[0]
        );
    }
}
