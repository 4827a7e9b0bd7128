//! Forwarding throughput, sandbox → internet, inside network namespaces:
//! no firewall vs corral (10k-entry allowlist in sets) vs a one-rule-per-
//! address chain as the reference design writes it (loaded with `nft -f`,
//! which only this baseline may use).
//!
//! Two workloads: one bulk TCP stream for a fixed time (per-packet cost of
//! established traffic), and new TCP connections per second to the LAST
//! allowlisted address (per-new-flow cost, where a linear chain walks every
//! rule). Each figure is the median of `RUNS` runs. Needs root; run with
//! `cargo bench -p corral-egress --bench throughput`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_egress::netns::{Lab, Netns, require_root};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

const ENTRIES: usize = 10_000;
const RUNS: usize = 5;
const BULK: Duration = Duration::from_secs(2);
const CONNECT: Duration = Duration::from_secs(1);
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
        "table inet refbench {\n chain fwd {\n  type filter hook forward priority 0; policy accept;\n",
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

/// New TCP connections per second (each closed with a reset, so no
/// TIME_WAIT builds up).
fn connects(ns: &Netns) -> f64 {
    let to = SocketAddr::new(IpAddr::V4(TARGET), PORT);
    let n = ns
        .run(|| {
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed() < CONNECT {
                if let Ok(s) = TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
                    let _ = set_linger_zero(&s);
                    n += 1;
                }
            }
            n as f64 / start.elapsed().as_secs_f64()
        })
        .unwrap_or_else(|e| panic!("connects: {e}"));
    n
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

fn measure(name: &str, ns: &Netns) -> (f64, f64) {
    let g = median((0..RUNS).map(|_| bulk(ns)).collect());
    let c = median((0..RUNS).map(|_| connects(ns)).collect());
    println!("{name:<28} {g:>8.2} Gbit/s {c:>10.0} conn/s");
    (g, c)
}

fn main() {
    if !require_root("throughput bench") {
        return;
    }
    let cfg = config();
    let lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap_or_else(|e| panic!("lab: {e}"));
    lab.control().unwrap_or_else(|e| panic!("control: {e}"));
    start_sink(&lab.topo.internet);
    let sb = &lab.sandbox("bench").ns;
    println!("forwarding sandbox -> internet, {ENTRIES} allowlisted addresses, median of {RUNS}");

    let none = measure("no firewall", sb);

    let report = lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
    println!(
        "  (corral applied {} rules, {} set elements)",
        report.rules, report.set_elements
    );
    let corral = measure("corral (sets)", sb);

    lab.topo
        .host
        .run(corral_egress::nft::delete_tables)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("delete tables: {e}"));
    nft_f(&lab.topo.host, &linear_ruleset());
    let linear = measure("one rule per address", sb);

    println!();
    println!("| setup | bulk TCP Gbit/s | ratio | new conn/s | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (name, (g, c)) in [
        ("no firewall", none),
        ("corral, 10k-entry sets", corral),
        ("one rule per address (10k rules)", linear),
    ] {
        println!(
            "| {name} | {g:.2} | {:.2} | {c:.0} | {:.2} |",
            g / none.0,
            c / none.1
        );
    }
}
