//! Checks run inside a VM's guest through the provider's exec path, with
//! what a stock Linux guest has: `sh`, `nc` (OpenBSD or BSD netcat, for
//! `-z -v -w`), `ping` (iputils, `-c 1 -w`), and `getent` or `nslookup`.
//! Nothing is pushed into the guest. Each check is one `sh -c` whose last
//! line is `corral-rc=<exit status>`; the rest is the tool's own words,
//! which classify the result. A missing tool or an answer corral cannot
//! read is a probe error, which fails the check (never a pass).
//!
//! The guest's root can lie about all of this; a VM's canary is evidence
//! about the filter outside it (the guest cannot fake a connection it
//! could not make, so a must-connect check stays meaningful), and the
//! start gate and host rules stay the enforcement where corral owns them.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use corral_sandbox_core::sandbox::{ExecRequest, Sandbox};
use corral_sandbox_core::verify::{CanaryCheck, Observed, ProbeTarget};

use super::probe::{ANY_NAME, Seen};

/// Extra time an exec gets over the check's bound (the exec round trip).
const EXEC_SLACK: Duration = Duration::from_secs(5);

/// The script and its arguments for `target` (`$0`, `$1`, … in the script).
pub fn command(target: &ProbeTarget, bound: Duration) -> Vec<String> {
    let secs = bound.as_secs().max(1).to_string();
    let script = |s: &str, args: &[String]| {
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("{s}; echo corral-rc=$?"),
        ];
        argv.extend(args.iter().cloned());
        argv
    };
    match target {
        ProbeTarget::Addr(a) => script(
            r#"nc -v -z -w "$2" "$0" "$1" 2>&1"#,
            &[a.ip().to_string(), a.port().to_string(), secs],
        ),
        ProbeTarget::Name { host, port } => script(
            r#"nc -v -z -w "$2" "$0" "$1" 2>&1"#,
            &[host.to_string(), port.to_string(), secs],
        ),
        ProbeTarget::Udp(a) => script(
            r#"printf corral-canary | nc -u -v -w "$2" "$0" "$1" 2>&1"#,
            &[a.ip().to_string(), a.port().to_string(), secs],
        ),
        ProbeTarget::Ping(ip) => script(r#"ping -c 1 -w "$1" "$0" 2>&1"#, &[ip.to_string(), secs]),
        ProbeTarget::Resolver(server) => script(
            r#"nslookup "$0" "$1" 2>&1"#,
            &[ANY_NAME.to_owned(), server.ip().to_string()],
        ),
        ProbeTarget::Lookup(name) => script(
            r#"if command -v getent >/dev/null 2>&1; then getent hosts "$0"; else nslookup "$0"; fi 2>&1"#,
            &[name.to_string()],
        ),
        ProbeTarget::LookupAt { server, name } => script(
            r#"nslookup "$0" "$1" 2>&1"#,
            &[name.to_string(), server.ip().to_string()],
        ),
    }
}

/// Split the tool's words from the `corral-rc=N` line.
fn split(output: &str) -> (String, Option<i32>) {
    let mut rc = None;
    let mut words = Vec::new();
    for line in output.lines() {
        match line.strip_prefix("corral-rc=") {
            Some(n) => rc = n.trim().parse().ok(),
            None => words.push(line),
        }
    }
    (words.join("\n"), rc)
}

fn missing_tool(words: &str, rc: i32) -> bool {
    rc == 127 || words.contains("not found") && words.contains("sh:")
}

/// Classify a connect attempt's words (nc's messages).
fn connect_outcome(words: &str, rc: i32, udp: bool) -> Observed {
    let w = words.to_ascii_lowercase();
    if missing_tool(&w, rc) {
        return Observed::ProbeError(format!(
            "a tool the check needs is missing in the guest: {words}"
        ));
    }
    if w.contains("refused") {
        // A UDP "refused" is the destination's port unreachable: reached.
        return if udp {
            Observed::Connected
        } else {
            Observed::Refused
        };
    }
    if w.contains("unreachable") || w.contains("no route") || w.contains("prohibited") {
        return Observed::Unreachable;
    }
    if w.contains("timed out") || w.contains("timeout") {
        return Observed::TimedOut;
    }
    if udp {
        // nc reports success for any UDP send; only an answer or a port
        // unreachable shows the datagram arrived.
        return if w.contains("corral-canary") {
            Observed::Connected
        } else {
            Observed::TimedOut
        };
    }
    if rc == 0 {
        return Observed::Connected;
    }
    Observed::ProbeError(format!("unreadable result (exit {rc}): {words}"))
}

/// Addresses in `getent hosts` or `nslookup` output (nslookup's own server
/// lines, before the first `Name:`, are not answers).
fn addresses(words: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut past_server = !words.contains("Server:");
    for line in words.lines() {
        let line = line.trim();
        if line.starts_with("Name:") {
            past_server = true;
            continue;
        }
        let first = line
            .strip_prefix("Address:")
            .or_else(|| line.strip_prefix("Address 1:"))
            .unwrap_or(line)
            .split_whitespace()
            .next()
            .unwrap_or("");
        if past_server && let Ok(ip) = first.parse::<IpAddr>() {
            out.push(ip);
        }
    }
    out
}

fn lookup_outcome(words: &str, rc: i32) -> Observed {
    let w = words.to_ascii_lowercase();
    if missing_tool(&w, rc) {
        return Observed::ProbeError(format!("neither getent nor nslookup in the guest: {words}"));
    }
    if w.contains("timed out") || w.contains("no servers could be reached") {
        return Observed::TimedOut;
    }
    let addrs = addresses(words);
    if !addrs.is_empty() {
        return Observed::Resolved(addrs);
    }
    Observed::NotResolved
}

fn resolver_outcome(words: &str, rc: i32) -> Observed {
    let w = words.to_ascii_lowercase();
    if missing_tool(&w, rc) {
        return Observed::ProbeError(format!("nslookup is missing in the guest: {words}"));
    }
    if w.contains("timed out") || w.contains("no servers could be reached") {
        return Observed::TimedOut;
    }
    if w.contains("unreachable") || w.contains("prohibited") {
        return Observed::Unreachable;
    }
    // Any verdict on the name is an answer from the server.
    if w.contains("nxdomain")
        || w.contains("can't find")
        || w.contains("servfail")
        || w.contains("refused")
    {
        return Observed::Connected;
    }
    Observed::ProbeError(format!("unreadable result (exit {rc}): {words}"))
}

/// Classify one guest run of `target`.
pub fn classify(target: &ProbeTarget, output: &str) -> Observed {
    let (words, rc) = split(output);
    let Some(rc) = rc else {
        return Observed::ProbeError(format!("the guest script did not finish: {words}"));
    };
    match target {
        ProbeTarget::Addr(_) | ProbeTarget::Name { .. } => connect_outcome(&words, rc, false),
        ProbeTarget::Udp(_) => connect_outcome(&words, rc, true),
        ProbeTarget::Ping(_) if rc == 0 => Observed::Connected,
        ProbeTarget::Ping(_) => connect_outcome(&words, rc, false),
        ProbeTarget::Resolver(_) => resolver_outcome(&words, rc),
        ProbeTarget::Lookup(_) | ProbeTarget::LookupAt { .. } => lookup_outcome(&words, rc),
    }
}

/// Run `check` in the guest.
pub async fn probe(sandbox: &dyn Sandbox, check: &CanaryCheck) -> Seen {
    let start = Instant::now();
    let req = ExecRequest::new(command(&check.target, check.bound))
        .with_timeout(check.bound + EXEC_SLACK);
    match sandbox.exec(&req).await {
        Ok(out) => {
            let text = format!("{}{}", out.stdout_text(), out.stderr_text());
            Seen {
                observed: classify(&check.target, &text),
                output: text,
                elapsed: start.elapsed(),
            }
        }
        Err(e) => Seen {
            observed: Observed::ProbeError(format!("exec in the guest failed: {e}")),
            output: String::new(),
            elapsed: start.elapsed(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> ProbeTarget {
        ProbeTarget::Addr(s.parse().unwrap())
    }

    #[test]
    fn commands_pass_values_as_arguments_never_in_the_script() {
        let argv = command(&t("198.51.100.7:443"), Duration::from_secs(5));
        assert_eq!(argv[0..2], ["sh", "-c"]);
        assert!(!argv[2].contains("198.51.100.7"));
        assert_eq!(argv[3..], ["198.51.100.7", "443", "5"]);
        let name = ProbeTarget::Lookup("unlisted.example.org".parse().unwrap());
        assert_eq!(
            command(&name, Duration::from_secs(5))[3],
            "unlisted.example.org"
        );
    }

    #[test]
    fn openbsd_and_bsd_netcat_words_classify() {
        let a = t("198.51.100.7:443");
        let cases = [
            (
                "Connection to 198.51.100.7 443 port [tcp/https] succeeded!\ncorral-rc=0",
                Observed::Connected,
            ),
            (
                "nc: connect to 198.51.100.7 port 443 (tcp) failed: Connection refused\ncorral-rc=1",
                Observed::Refused,
            ),
            (
                "nc: connect to 198.51.100.7 port 443 (tcp) timed out: Operation now in progress\ncorral-rc=1",
                Observed::TimedOut,
            ),
            (
                "nc: connectx to 198.51.100.7 port 443 (tcp) failed: Operation timed out\ncorral-rc=1",
                Observed::TimedOut,
            ),
            (
                "nc: connect to 198.51.100.7 port 443 (tcp) failed: No route to host\ncorral-rc=1",
                Observed::Unreachable,
            ),
            (
                "nc: connect to 198.51.100.7 port 443 (tcp) failed: Network is unreachable\ncorral-rc=1",
                Observed::Unreachable,
            ),
        ];
        for (out, want) in cases {
            assert_eq!(classify(&a, out), want, "{out}");
        }
        assert!(matches!(
            classify(&a, "sh: 1: nc: not found\ncorral-rc=127"),
            Observed::ProbeError(_)
        ));
        assert!(
            matches!(classify(&a, "killed"), Observed::ProbeError(_)),
            "no rc line"
        );
        let u = ProbeTarget::Udp("198.51.100.7:443".parse().unwrap());
        assert_eq!(
            classify(&u, "nc: read(net): Connection refused\ncorral-rc=1"),
            Observed::Connected
        );
        assert_eq!(
            classify(
                &u,
                "Connection to 198.51.100.7 443 port [udp/*] succeeded!\ncorral-rc=0"
            ),
            Observed::TimedOut,
            "a UDP send alone proves nothing"
        );
    }

    #[test]
    fn lookups_classify() {
        let l = ProbeTarget::Lookup("unlisted.example.org".parse().unwrap());
        assert_eq!(classify(&l, "corral-rc=2"), Observed::NotResolved);
        assert_eq!(
            classify(&l, "192.0.2.9      unlisted.example.org\ncorral-rc=0"),
            Observed::Resolved(vec!["192.0.2.9".parse().unwrap()])
        );
        let ns = "Server:\t\t10.231.3.1\nAddress:\t10.231.3.1#53\n\n** server can't find unlisted.example.org: NXDOMAIN\ncorral-rc=1";
        assert_eq!(classify(&l, ns), Observed::NotResolved);
        let ok = "Server:\t\t10.231.3.1\nAddress:\t10.231.3.1#53\n\nName:\tx.example.org\nAddress: 203.0.113.10\ncorral-rc=0";
        assert_eq!(
            classify(&l, ok),
            Observed::Resolved(vec!["203.0.113.10".parse().unwrap()])
        );
        let r = ProbeTarget::Resolver("198.51.100.7:53".parse().unwrap());
        assert_eq!(
            classify(
                &r,
                ";; connection timed out; no servers could be reached\ncorral-rc=1"
            ),
            Observed::TimedOut
        );
        assert_eq!(classify(&r, ns), Observed::Connected);
    }
}
