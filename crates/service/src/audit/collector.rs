//! The host side that writes network records into the trail: it reads
//! every gateway's query log (and, where the kernel logs blocked packets,
//! the drop log), attributes each record to a sandbox and appends it.
//!
//! One collector per state directory: it holds `audit/collector.lock`
//! while it runs, so corrald and a `corral log --follow` never both
//! collect (each record is written once). Records are made only while a
//! collector runs; what a gateway logged before is skipped, not replayed.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_egress::host::StateStore;
use corral_gateway::GatewayPaths;
use corral_sandbox_core::audit::NetRecord;
use corral_sandbox_core::sandbox::BoundNic;
use corral_sandbox_core::verify::Clock;
use corral_state_files::{StateDir, StateLock};

use super::{AuditError, AuditLog, DIR, DnsTracker, Entry};
use crate::clock::WallClock;

/// How often the gateways' logs are read.
const POLL: Duration = Duration::from_millis(200);
/// How often the applied gateways and the address directory are re-read.
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

/// No provider: records stay unattributed unless they name their sandbox.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNics;

impl NicSource for NoNics {
    fn nics(&self) -> Vec<(String, BoundNic)> {
        Vec::new()
    }
}

/// A running collector; dropping it stops it.
#[derive(Debug)]
pub struct Collector {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _lock: StateLock,
}

impl Collector {
    /// Starts collecting into the trail of `state_dir`, unless another
    /// process already does (`None`).
    pub fn try_start(
        state_dir: &Path,
        nics: Arc<dyn NicSource>,
    ) -> Result<Option<Collector>, AuditError> {
        let dir = StateDir::open(state_dir)?.subdir(DIR)?;
        let Some(lock) = dir.try_lock(LOCK)? else {
            return Ok(None);
        };
        let log = AuditLog::open(state_dir)?;
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            state_dir: state_dir.to_owned(),
            log,
            nics,
            directory: Arc::new(RwLock::new(super::Directory::default())),
            gateways: Vec::new(),
            refreshed: None,
        };
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("corral-audit".into())
            .spawn(move || worker.run(&flag))
            .map_err(|source| AuditError::Read {
                path: state_dir.to_owned(),
                source,
            })?;
        Ok(Some(Collector {
            stop,
            thread: Some(thread),
            _lock: lock,
        }))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One gateway's query log being followed.
#[derive(Debug)]
struct GatewayLog {
    path: PathBuf,
    offset: u64,
    tracker: DnsTracker,
}

struct Worker {
    state_dir: PathBuf,
    log: AuditLog,
    nics: Arc<dyn NicSource>,
    directory: Arc<RwLock<super::Directory>>,
    gateways: Vec<GatewayLog>,
    refreshed: Option<Instant>,
}

impl Worker {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if self.refreshed.is_none_or(|t| t.elapsed() >= REFRESH) {
                self.refresh();
            }
            let records = self.read_gateways();
            self.write(records);
            std::thread::sleep(POLL);
        }
    }

    /// Re-reads which gateways exist and who holds which address.
    fn refresh(&mut self) {
        self.refreshed = Some(Instant::now());
        let inputs = match StateStore::new(&self.state_dir).load() {
            Ok(Some(i)) => i,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "audit: cannot read what was applied");
                return;
            }
        };
        if let Ok(config) = inputs.config() {
            let mut next = Vec::new();
            for p in &config.profiles {
                let path = GatewayPaths::new(&self.state_dir, &p.bridge).log();
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
                        });
                    }
                }
            }
            self.gateways = next;
        }
        let directory = super::Directory::build(&inputs.bindings, &self.nics.nics());
        if let Ok(mut d) = self.directory.write() {
            *d = directory;
        }
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
                out.extend(g.tracker.line(line));
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

    fn write(&self, records: Vec<NetRecord>) {
        if records.is_empty() {
            return;
        }
        let now = WallClock.now();
        let Ok(directory) = self.directory.read() else {
            return;
        };
        for r in records {
            let r = directory.attribute(r);
            if let Err(e) = self.log.append(now, Entry::Net(r)) {
                tracing::warn!(error = %e, "audit: cannot append a record");
            }
        }
    }
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
