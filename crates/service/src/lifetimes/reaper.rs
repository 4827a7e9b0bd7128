//! corrald's reaper: every tick it looks at each sandbox the store gives a
//! lifetime, deletes one whose time to live ran out (an `expired` event,
//! then the delete's own `deleted`) and stops a running one idle for its
//! limit (an `idle_stopped` event, then `stopped`). A delete or stop that
//! fails is logged and tried again on the next tick.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use corral_sandbox_core::sandbox::{SandboxInfo, SandboxState, StopOptions};
use serde::Serialize;

use super::{Activity, Decision, Sample, decide};
use crate::SandboxService;
use crate::hooks::Event;
use crate::verify::Verifier;

/// How often the reaper looks, unless told otherwise.
pub const TICK: Duration = Duration::from_secs(2);

/// How long an idle stop waits for a clean shutdown before it kills.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What one tick did to one sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reaped {
    /// The sandbox.
    pub name: String,
    /// `expired` or `idle_stopped`.
    pub event: &'static str,
    /// Whether the delete or stop worked (else: why not).
    pub done: Result<(), String>,
}

/// The reaper (see the module docs).
#[derive(Debug)]
pub struct Reaper {
    verifier: Verifier,
    service: SandboxService,
    tick: Duration,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    /// What each running sandbox has done since the reaper first saw it.
    activity: BTreeMap<String, Activity>,
    /// Whose `expired` or `idle_stopped` is recorded (a retry after a
    /// failed delete or stop records nothing new).
    recorded: BTreeSet<(String, &'static str)>,
}

impl Reaper {
    /// A reaper acting through `service`, reading and recording through
    /// `verifier`'s store and clock.
    pub fn new(verifier: Verifier, service: SandboxService) -> Self {
        Self {
            verifier,
            service,
            tick: TICK,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// The same, looking every `tick` (at least 100 ms).
    #[must_use]
    pub fn with_tick(mut self, tick: Duration) -> Self {
        self.tick = tick.max(Duration::from_millis(100));
        self
    }

    /// Look at every sandbox with a lifetime once, and act.
    pub async fn pass(&self) -> Vec<Reaped> {
        let lifetimes = match self.verifier.store().lifetimes() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "reaper: cannot read the lifetimes");
                return Vec::new();
            }
        };
        if lifetimes.is_empty() {
            self.memory().activity.clear();
            return Vec::new();
        }
        let listed = match self.service.list().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "reaper: cannot list sandboxes");
                return Vec::new();
            }
        };
        let infos: BTreeMap<String, _> = listed
            .into_iter()
            .map(|i| (i.name.to_string(), i))
            .collect();
        let mut out = Vec::new();
        let mut running = BTreeSet::new();
        for (name, life) in lifetimes {
            let Some(info) = infos.get(&name) else {
                continue;
            };
            let now = self.verifier.clock().now();
            let activity = if info.state == SandboxState::Running && life.idle_stop_secs.is_some() {
                running.insert(name.clone());
                let sample = self.sample(&name, info).await;
                let mut seen = self.memory();
                let a = seen
                    .activity
                    .entry(name.clone())
                    .and_modify(|a| a.observe(&sample))
                    .or_insert_with(|| Activity::first(&sample));
                Some(a.clone())
            } else {
                None
            };
            let (event, reason) = match decide(now, &life, activity.as_ref()) {
                Decision::Keep => continue,
                Decision::Expire => (
                    "expired",
                    Event::Expired {
                        name: name.clone(),
                        ttl_secs: life.ttl_secs.unwrap_or_default(),
                    },
                ),
                Decision::IdleStop { idle_secs } => (
                    "idle_stopped",
                    Event::IdleStopped {
                        name: name.clone(),
                        idle_stop_secs: life.idle_stop_secs.unwrap_or_default(),
                        idle_secs,
                    },
                ),
            };
            if self.memory().recorded.insert((name.clone(), event)) {
                self.verifier.record_now(&reason);
            }
            let done = match event {
                "expired" => self.service.delete(&name).await.map(|_| ()),
                _ => self.stop(&name).await,
            }
            .map_err(|e| chain(&e));
            match &done {
                Ok(()) => {
                    tracing::info!(sandbox = %name, event, "reaper: done");
                    let mut seen = self.memory();
                    seen.recorded.remove(&(name.clone(), event));
                    seen.activity.remove(&name);
                    running.remove(&name);
                }
                Err(e) => {
                    tracing::error!(sandbox = %name, event, error = %e, "reaper: not done; trying again next tick")
                }
            }
            out.push(Reaped { name, event, done });
        }
        // A sandbox seen stopped (or gone) starts its idle clock afresh
        // the next time it runs.
        self.memory().activity.retain(|n, _| running.contains(n));
        out
    }

    /// Looks every tick until the task is dropped.
    pub async fn run(self) {
        loop {
            tokio::time::sleep(self.tick).await;
            self.pass().await;
        }
    }

    async fn sample(&self, name: &str, info: &SandboxInfo) -> Sample {
        // No network, no packets; a profiled one whose port corral did not
        // bind cannot be measured (never idle).
        let sent_packets = match (&info.nic, &info.profile) {
            (Some(nic), _) => sent_packets(Path::new("/sys/class/net"), nic.port.as_str()),
            (None, None) => Some(0),
            (None, Some(_)) => None,
        };
        let exec_sessions = match self.service.open(name).await {
            Ok(s) => s.exec_sessions().await.unwrap_or_else(|e| {
                tracing::warn!(sandbox = %name, error = %e, "reaper: cannot count its exec sessions");
                None
            }),
            Err(_) => None,
        };
        let last_verified = self
            .verifier
            .store()
            .sandbox(name)
            .ok()
            .flatten()
            .and_then(|r| r.last_verified);
        Sample {
            at: self.verifier.clock().now(),
            sent_packets,
            exec_sessions,
            last_verified,
        }
    }

    async fn stop(&self, name: &str) -> Result<(), crate::error::ServiceError> {
        let clean = StopOptions {
            force: false,
            timeout: Some(STOP_TIMEOUT),
        };
        if self.service.stop(name, clean).await.is_ok() {
            return Ok(());
        }
        self.service
            .stop(
                name,
                StopOptions {
                    force: true,
                    timeout: None,
                },
            )
            .await
            .map(|_| ())
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The error and its causes on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The packets interface `port` received from its other end (the guest
/// sent), from sysfs under `class_net`; `None` when it cannot be read.
pub fn sent_packets(class_net: &Path, port: &str) -> Option<u64> {
    if port.is_empty() || port.contains('/') || port.starts_with('.') {
        return None;
    }
    let path = class_net.join(port).join("statistics/rx_packets");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_port_s_received_packets_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let stats = dir.path().join("crl0a/statistics");
        std::fs::create_dir_all(&stats).unwrap();
        std::fs::write(stats.join("rx_packets"), "42\n").unwrap();
        std::fs::write(stats.join("tx_packets"), "99\n").unwrap();
        assert_eq!(sent_packets(dir.path(), "crl0a"), Some(42));
        assert_eq!(sent_packets(dir.path(), "crl0b"), None);
        assert_eq!(sent_packets(dir.path(), "../crl0a"), None);
        // The loopback interface of this host is always there.
        assert!(sent_packets(Path::new("/sys/class/net"), "lo").is_some());
    }
}
