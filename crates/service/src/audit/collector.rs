//! The host side that writes network records into the trail: the kernel's
//! drop log (NFLOG, read over netlink), every gateway's query log, and the
//! per-profile count of blocked packets the log budget kept out. Each
//! record is attributed to a sandbox (its source address must be a bound
//! address sent from its bound MAC; see `corral_egress::droplog`) and
//! appended.
//!
//! One collector per state directory: it holds `audit/collector.lock`
//! while it runs, so corrald and a `corral log --follow` never both
//! collect (each record is written once; the kernel would refuse a second
//! reader of the drop log anyway). Records are made only while a collector
//! runs; what a gateway logged before is skipped, not replayed. Each run is
//! recorded (`coverage`) so a reader can say what it did not see.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_egress::droplog::{self, BindingAttribution, Reader};
use corral_egress::host::StateStore;
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_gateway::GatewayPaths;
use corral_sandbox_core::audit::{Blocked, NetRecord};
use corral_sandbox_core::sandbox::BoundNic;
use corral_sandbox_core::verify::Clock;
use corral_state_files::{StateDir, StateLock};

use super::{AuditError, AuditLog, DIR, DnsTracker, Entry};
use crate::clock::WallClock;

/// How often the gateways' logs are read, and the longest the drop-log
/// reader waits before looking at its stop flag.
const POLL: Duration = Duration::from_millis(200);
/// How often the applied gateways, the attribution and the suppressed
/// counts are re-read.
const REFRESH: Duration = Duration::from_secs(5);
/// A gateway log longer than this is emptied once read (dnsmasq appends,
/// so it carries on at the start).
pub const GATEWAY_LOG_LIMIT: u64 = 4 * 1024 * 1024;
/// The lock a running collector holds, in the audit directory.
pub const LOCK: &str = "collector.lock";

/// Where the collector learns which sandbox has which NIC (the provider's
/// record); called from the collector's own thread.
pub trait NicSource: Send + Sync {
    /// Every sandbox's name and bound NIC.
    fn nics(&self) -> Vec<(String, BoundNic)>;
}

/// No provider: records stay unattributed.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNics;

impl NicSource for NoNics {
    fn nics(&self) -> Vec<(String, BoundNic)> {
        Vec::new()
    }
}

/// Who sent what, shared by the collector's threads: the bindings, and
/// each profile bridge's interface index (a frame the bridge table
/// dropped is logged with the bridge as its input interface, and names
/// no profile itself).
#[derive(Default)]
struct Attributing {
    who: BindingAttribution,
    bridges: std::collections::HashMap<u32, String>,
}

type Who = Arc<RwLock<Attributing>>;

/// A running collector; dropping it stops it.
#[derive(Debug)]
pub struct Collector {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    drop_log: bool,
    _lock: StateLock,
}

impl Collector {
    /// Starts collecting what was applied to `netns` (this process's
    /// namespace when `None`) into the trail of `state_dir`, unless another
    /// process already does (`None`).
    pub fn try_start(
        state_dir: &Path,
        netns: Option<&str>,
        nics: Arc<dyn NicSource>,
    ) -> Result<Option<Collector>, AuditError> {
        let dir = StateDir::open(state_dir)?.subdir(DIR)?;
        let Some(lock) = dir.try_lock(LOCK)? else {
            return Ok(None);
        };
        let since = WallClock.now();
        super::coverage::mark(&dir, since, since)?;
        let spawn_err = |source| AuditError::Read {
            path: state_dir.to_owned(),
            source,
        };
        let ns = Arc::new(
            match netns {
                None => Netns::current(),
                Some(n) => Netns::open(n),
            }
            .map_err(spawn_err)?,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let who: Who = Arc::default();
        let mut threads = Vec::new();
        // The drop log: absent when another reader holds the group (ulogd)
        // or the kernel has no nfnetlink_log; DNS records still flow.
        let drop_log = match Reader::open_in(&ns, droplog::GROUP) {
            Ok(reader) => {
                let (log, who, flag) = (
                    AuditLog::open(state_dir)?,
                    Arc::clone(&who),
                    Arc::clone(&stop),
                );
                threads.push(
                    std::thread::Builder::new()
                        .name("corral-droplog".into())
                        .spawn(move || read_drops(reader, &log, &who, &flag))
                        .map_err(spawn_err)?,
                );
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "audit: blocked packets are counted but not logged one by one");
                false
            }
        };
        let worker = Worker {
            state_dir: state_dir.to_owned(),
            ns,
            log: AuditLog::open(state_dir)?,
            nics,
            who,
            since,
            gateways: Vec::new(),
            suppressed: None,
            refreshed: None,
        };
        let flag = Arc::clone(&stop);
        threads.push(
            std::thread::Builder::new()
                .name("corral-audit".into())
                .spawn(move || worker.run(&flag))
                .map_err(spawn_err)?,
        );
        Ok(Some(Collector {
            stop,
            threads,
            drop_log,
            _lock: lock,
        }))
    }

    /// True when blocked packets are read one by one (the drop log's group
    /// was free); otherwise they are only counted.
    pub fn reads_drop_log(&self) -> bool {
        self.drop_log
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn read_drops(mut reader: Reader, log: &AuditLog, who: &Who, stop: &AtomicBool) {
    let mut lost = 0;
    while !stop.load(Ordering::Relaxed) {
        let entry = match reader.next_timeout(Some(POLL)) {
            Ok(Some(e)) => e,
            Ok(None) => continue,
            Err(e) => {
                tracing::error!(error = %e, "audit: the drop log failed; blocked packets are no longer logged one by one");
                return;
            }
        };
        if reader.lost() > lost {
            tracing::warn!(
                lost = reader.lost() - lost,
                "audit: the drop log's socket overflowed; some blocked packets were not logged"
            );
            lost = reader.lost();
        }
        let record = {
            let who = who.read().unwrap_or_else(PoisonError::into_inner);
            NetRecord::Blocked(blocked(&entry, &who))
        };
        append(log, record);
    }
}

/// The record of a blocked packet. A shared chain's rule (the bridge
/// table's, the inet table's shared guard) names no profile in its prefix:
/// the packet arrived on the profile's bridge, which names it.
fn blocked(entry: &corral_egress::droplog::Entry, who: &Attributing) -> Blocked {
    let mut blocked = entry.blocked(&who.who);
    if blocked.profile.is_empty()
        && let Some(profile) = entry.indev.and_then(|i| who.bridges.get(&i))
    {
        blocked.profile = profile.clone();
    }
    blocked
}

fn append(log: &AuditLog, record: NetRecord) {
    if let Err(e) = log.append(WallClock.now(), Entry::Net(record)) {
        tracing::warn!(error = %e, "audit: cannot append a record");
    }
}

/// One gateway's query log being followed.
#[derive(Debug)]
struct GatewayLog {
    path: PathBuf,
    offset: u64,
    tracker: DnsTracker,
    /// corral's resolver's own trail (JSON lines) rather than dnsmasq's
    /// query log.
    resolver: bool,
}

struct Worker {
    state_dir: PathBuf,
    ns: Arc<Netns>,
    log: AuditLog,
    nics: Arc<dyn NicSource>,
    who: Who,
    /// When this collector started (for the coverage record).
    since: corral_sandbox_core::verify::Timestamp,
    gateways: Vec<GatewayLog>,
    /// Each profile's suppressed count at the last look (`None` before
    /// the first: that look is the baseline, not news).
    suppressed: Option<BTreeMap<String, u64>>,
    refreshed: Option<Instant>,
}

impl Worker {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if self.refreshed.is_none_or(|t| t.elapsed() >= REFRESH) {
                self.refresh();
            }
            for r in self.read_gateways() {
                let r = attribute(&self.who, r);
                append(&self.log, r);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Re-reads which gateways exist, who holds which address, and how
    /// many blocked packets went unlogged.
    fn refresh(&mut self) {
        self.refreshed = Some(Instant::now());
        let marked = StateDir::open(&self.state_dir)
            .and_then(|d| d.subdir(DIR))
            .map_err(AuditError::from)
            .and_then(|d| super::coverage::mark(&d, self.since, WallClock.now()));
        if let Err(e) = marked {
            tracing::warn!(error = %e, "audit: cannot record that collection runs");
        }
        let store = StateStore::new(&self.state_dir);
        let inputs = match store.load() {
            Ok(Some(i)) => i,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "audit: cannot read what was applied");
                return;
            }
        };
        let mut bridges = std::collections::HashMap::new();
        if let Ok(config) = inputs.config() {
            for p in &config.profiles {
                let name = p.bridge.to_string();
                if let Ok(Ok(index)) = self
                    .ns
                    .run(move || nix::net::if_::if_nametoindex(name.as_str()))
                {
                    bridges.insert(index, p.name.to_string());
                }
            }
            let mut next = Vec::new();
            for p in &config.profiles {
                let paths = GatewayPaths::new(&self.state_dir, &p.bridge);
                let logs = [
                    (paths.log(), false),
                    (paths.dir().join(corral_gateway::resolver::AUDIT_FILE), true),
                ];
                for (path, resolver) in logs {
                    match self.gateways.iter().position(|g| g.path == path) {
                        Some(i) => next.push(self.gateways.swap_remove(i)),
                        None => {
                            // Start at the end: what was logged before this
                            // collector ran is not replayed.
                            let offset = std::fs::metadata(&path).map_or(0, |m| m.len());
                            next.push(GatewayLog {
                                path,
                                offset,
                                tracker: DnsTracker::new(p.name.as_str()),
                                resolver,
                            });
                        }
                    }
                }
            }
            self.gateways = next;
        }
        let nics = self.nics.nics();
        let who = BindingAttribution::new(&inputs.bindings, |b| {
            nics.iter()
                .find(|(_, nic)| nic.port == b.port && nic.mac == b.mac)
                .map(|(name, _)| name.clone())
        });
        *self.who.write().unwrap_or_else(PoisonError::into_inner) = Attributing { who, bridges };
        self.count_suppressed(&store);
    }

    /// A `suppressed` record per profile whose unlogged count grew.
    fn count_suppressed(&mut self, store: &StateStore) {
        let Ok(Some(planned)) = crate::host::applied(store) else {
            return;
        };
        let Ok(Ok(live)) = self.ns.run(nft::read_live) else {
            return;
        };
        let now: BTreeMap<String, u64> = nft::profile_counters(&planned.plan, &live)
            .into_iter()
            .map(|c| (c.profile, c.suppressed_packets))
            .collect();
        if let Some(before) = &self.suppressed {
            for (profile, n) in &now {
                // A count lower than before: the rules were re-applied and
                // their counters started again from zero.
                let grew =
                    n.saturating_sub(before.get(profile).copied().filter(|b| b <= n).unwrap_or(0));
                if grew > 0 {
                    append(
                        &self.log,
                        NetRecord::Suppressed {
                            profile: profile.clone(),
                            packets: grew,
                        },
                    );
                }
            }
        }
        self.suppressed = Some(now);
    }

    fn read_gateways(&mut self) -> Vec<NetRecord> {
        let mut out = Vec::new();
        for g in &mut self.gateways {
            let Ok(mut f) = File::open(&g.path) else {
                continue;
            };
            let len = f.metadata().map_or(0, |m| m.len());
            if len < g.offset {
                // Emptied (by us, or the gateway restarted on a new file).
                g.offset = 0;
            }
            let mut bytes = Vec::new();
            if f.seek(SeekFrom::Start(g.offset)).is_err() || f.read_to_end(&mut bytes).is_err() {
                continue;
            }
            // Only whole lines; a partial last line is read next time.
            let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
                continue;
            };
            g.offset += end as u64 + 1;
            for line in String::from_utf8_lossy(&bytes[..=end]).lines() {
                if g.resolver {
                    out.extend(g.tracker.resolver_line(line));
                } else {
                    out.extend(g.tracker.line(line));
                }
            }
            out.extend(g.tracker.flush());
            if g.offset > GATEWAY_LOG_LIMIT
                && g.offset == len
                && std::fs::OpenOptions::new()
                    .write(true)
                    .open(&g.path)
                    .and_then(|f| f.set_len(0))
                    .is_ok()
            {
                g.offset = 0;
            }
        }
        out
    }
}

/// `record` with its sandbox filled in from its source address (no MAC
/// is known for a query: the bridge's guards already tied the address to
/// its port before the query reached the gateway).
fn attribute(who: &Who, mut record: NetRecord) -> NetRecord {
    use corral_egress::droplog::Attribution as _;
    let who = who.read().unwrap_or_else(PoisonError::into_inner);
    if let NetRecord::DnsAnswered(d) | NetRecord::DnsRefused(d) = &mut record
        && d.sandbox.is_none()
    {
        d.sandbox = who.who.sandbox(d.src, None);
    }
    record
}

/// The NICs the service's provider reports, listed on `runtime`.
#[derive(Debug, Clone)]
pub struct ServiceNics {
    service: crate::sandboxes::SandboxService,
    runtime: tokio::runtime::Handle,
}

impl ServiceNics {
    /// Lists through `service` on `runtime` (the collector's thread is not
    /// a runtime thread, so it may wait on one).
    pub fn new(service: crate::sandboxes::SandboxService, runtime: tokio::runtime::Handle) -> Self {
        Self { service, runtime }
    }
}

impl NicSource for ServiceNics {
    fn nics(&self) -> Vec<(String, BoundNic)> {
        match self.runtime.block_on(self.service.list()) {
            Ok(list) => list
                .into_iter()
                .filter_map(|i| Some((i.name.to_string(), i.nic?)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %crate::error::chain(&e), "audit: cannot list sandboxes; records stay unattributed");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_egress::droplog::{Entry, parse_prefix};

    fn entry(prefix: &str, indev: u32) -> Entry {
        Entry {
            time: std::time::SystemTime::UNIX_EPOCH,
            prefix: parse_prefix(prefix).unwrap(),
            src: "10.90.0.7".parse().unwrap(),
            dst: "127.0.0.1".parse().unwrap(),
            protocol: 6,
            sport: Some(40_000),
            dport: Some(80),
            mac: None,
            indev: Some(indev),
        }
    }

    /// A shared rule's record names the profile of the bridge the packet
    /// arrived on and keeps the deciding rule's id; a profile's own rule
    /// keeps the profile its prefix names, whatever the interface.
    #[test]
    fn a_shared_rule_is_named_for_the_profile_of_its_bridge() {
        let who = Attributing {
            who: BindingAttribution::default(),
            bridges: [(7, "dev".to_owned()), (8, "web".to_owned())].into(),
        };
        let shared = blocked(&entry("shared_guard/loopback:drop", 7), &who);
        assert_eq!(
            (shared.profile.as_str(), shared.rule.as_str()),
            ("dev", "shared_guard/loopback")
        );
        let other = blocked(&entry("shared_guard/loopback:drop", 8), &who);
        assert_eq!(other.profile, "web");
        let own = blocked(&entry("web-out/unlisted:drop", 7), &who);
        assert_eq!(
            (own.profile.as_str(), own.rule.as_str()),
            ("web", "web-out/unlisted")
        );
        // A bridge corral does not know names no profile (not a guess).
        assert_eq!(
            blocked(&entry("shared_guard/invalid:drop", 9), &who).profile,
            ""
        );
    }
}
