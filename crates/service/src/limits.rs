//! Bounds on the work a caller can ask for: resources no bigger than the
//! host, a cap on provider operations in flight (with a bounded queue in
//! front of it), and one operation at a time per sandbox name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use corral_sandbox_core::sandbox::{ProviderError, Resources};
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

/// What this host has to give a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCapacity {
    /// Online CPUs.
    pub cpus: u32,
    /// Physical memory in MiB.
    pub memory_mib: u64,
}

/// The smallest memory limit corral passes on (a container's init and a
/// shell need a few MiB; less is a typo, not a sandbox).
pub const MIN_MEMORY_MIB: u64 = 32;

impl HostCapacity {
    /// Read this host's CPUs and memory.
    pub fn probe() -> std::io::Result<Self> {
        let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| count_cpu_list(s.trim()))
            .or_else(|| {
                std::thread::available_parallelism()
                    .ok()
                    .and_then(|n| u32::try_from(n.get()).ok())
            })
            .unwrap_or(1);
        let meminfo = std::fs::read_to_string("/proc/meminfo")?;
        let memory_mib = mem_total_kib(&meminfo)
            .ok_or_else(|| std::io::Error::other("/proc/meminfo has no MemTotal line"))?
            / 1024;
        Ok(Self { cpus, memory_mib })
    }

    /// Refuse limits this host cannot give (or that are zero).
    pub fn check(&self, r: &Resources) -> Result<(), ProviderError> {
        if let Some(cpus) = r.cpus
            && !(1..=self.cpus).contains(&cpus)
        {
            return Err(ProviderError::InvalidSpec {
                field: "resources.cpus",
                reason: format!(
                    "{cpus} asked; this host has {} CPU(s), so ask for 1 to {}",
                    self.cpus, self.cpus
                ),
            });
        }
        if let Some(mib) = r.memory_mib
            && !(MIN_MEMORY_MIB..=self.memory_mib).contains(&mib)
        {
            return Err(ProviderError::InvalidSpec {
                field: "resources.memory_mib",
                reason: format!(
                    "{mib} MiB asked; this host has {} MiB, so ask for {MIN_MEMORY_MIB} to {}",
                    self.memory_mib, self.memory_mib
                ),
            });
        }
        if r.disk_gib == Some(0) {
            return Err(ProviderError::InvalidSpec {
                field: "resources.disk_gib",
                reason: "0 asked; a root disk needs at least 1 GiB".into(),
            });
        }
        Ok(())
    }
}

/// The number of CPUs in a kernel CPU list such as `0-3,6,8-9`.
fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => {
                let one = part.parse::<u32>().ok()?;
                (one, one)
            }
        };
        n = n.checked_add(hi.checked_sub(lo)?.checked_add(1)?)?;
    }
    (n > 0).then_some(n)
}

/// `MemTotal` of a `/proc/meminfo` text, in KiB.
fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Too much work is in flight: come back later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "corrald is busy: {running} provider operation(s) running and {waiting} waiting (the limits are {running} and {queue}); retry after {}s",
    retry_after.as_secs()
)]
pub struct Saturated {
    /// Operations running (the cap).
    pub running: usize,
    /// Operations waiting for a turn.
    pub waiting: usize,
    /// The queue's bound.
    pub queue: usize,
    /// When a retry may succeed.
    pub retry_after: Duration,
}

/// At most `running` provider operations at once; up to `queue` more wait
/// for a turn, each at most `wait`; beyond that a caller is told to retry.
#[derive(Debug)]
pub struct OpLimiter {
    permits: Arc<Semaphore>,
    running: usize,
    waiting: AtomicUsize,
    queue: usize,
    wait: Duration,
}

/// A turn: held for the operation's duration.
#[derive(Debug)]
pub struct Turn {
    _permit: OwnedSemaphorePermit,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl OpLimiter {
    /// A limiter for `running` operations at once (at least one) and a
    /// queue of `queue` callers waiting at most `wait` each.
    pub fn new(running: usize, queue: usize, wait: Duration) -> Self {
        let running = running.max(1);
        Self {
            permits: Arc::new(Semaphore::new(running)),
            running,
            waiting: AtomicUsize::new(0),
            queue,
            wait,
        }
    }

    fn saturated(&self) -> Saturated {
        Saturated {
            running: self.running,
            waiting: self.waiting.load(Ordering::SeqCst),
            queue: self.queue,
            retry_after: Duration::from_secs(1),
        }
    }

    /// A turn, now or after waiting in the queue; `Saturated` when the
    /// queue is full or the wait ran out.
    pub async fn turn(&self) -> Result<Turn, Saturated> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Ok(Turn { _permit: permit });
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(self.saturated());
        }
        // Leaves the queue however this ends (done, timed out, cancelled).
        let _waiting = Waiting(&self.waiting);
        match tokio::time::timeout(self.wait, Arc::clone(&self.permits).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Turn { _permit: permit }),
            // Never closed; a closed semaphore means shutting down: busy.
            Ok(Err(_)) | Err(_) => Err(self.saturated()),
        }
    }
}

/// One operation at a time per sandbox name, so concurrent requests on
/// one sandbox (ten deletes) run one after the other and each sees the
/// state the previous one left.
#[derive(Debug, Default)]
pub struct NameLocks {
    locks: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl NameLocks {
    /// Wait for `name`'s turn.
    pub async fn lock(&self, name: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut map = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            // Forget names nobody holds, so the map stays as small as the
            // work in flight.
            map.retain(|_, w| w.strong_count() > 0);
            match map.get(name).and_then(Weak::upgrade) {
                Some(l) => l,
                None => {
                    let l = Arc::new(tokio::sync::Mutex::new(()));
                    map.insert(name.to_owned(), Arc::downgrade(&l));
                    l
                }
            }
        };
        lock.lock_owned().await
    }

    /// Names currently locked or waited for.
    pub fn held(&self) -> usize {
        let map = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        map.values().filter(|w| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_meminfo_parse() {
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
        assert_eq!(
            mem_total_kib("MemFree: 1 kB\nMemTotal:       24576000 kB\n"),
            Some(24_576_000)
        );
        let here = HostCapacity::probe().unwrap();
        assert!(here.cpus >= 1 && here.memory_mib > 0);
    }

    #[test]
    fn resources_beyond_the_host_are_refused_naming_the_field() {
        let host = HostCapacity {
            cpus: 2,
            memory_mib: 4096,
        };
        let ok = Resources {
            cpus: Some(2),
            memory_mib: Some(4096),
            disk_gib: Some(10),
        };
        host.check(&ok).unwrap();
        host.check(&Resources::default()).unwrap();
        for (bad, field) in [
            (
                Resources {
                    cpus: Some(100_000),
                    ..ok
                },
                "resources.cpus",
            ),
            (
                Resources {
                    cpus: Some(0),
                    ..ok
                },
                "resources.cpus",
            ),
            (
                Resources {
                    memory_mib: Some(4097),
                    ..ok
                },
                "resources.memory_mib",
            ),
            (
                Resources {
                    memory_mib: Some(1),
                    ..ok
                },
                "resources.memory_mib",
            ),
            (
                Resources {
                    disk_gib: Some(0),
                    ..ok
                },
                "resources.disk_gib",
            ),
        ] {
            match host.check(&bad) {
                Err(ProviderError::InvalidSpec { field: f, reason }) => {
                    assert_eq!(f, field, "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn the_limiter_queues_then_refuses() {
        let limiter = OpLimiter::new(1, 1, Duration::from_millis(50));
        let first = limiter.turn().await.unwrap();
        // The queue holds one waiter; a second is refused at once.
        let (queued, refused) = tokio::join!(limiter.turn(), async {
            tokio::task::yield_now().await;
            limiter.turn().await
        });
        let refused = refused.unwrap_err();
        assert_eq!(refused.queue, 1);
        assert!(refused.to_string().contains("retry after 1s"), "{refused}");
        // The queued one ran out of time while `first` was held.
        assert!(queued.is_err());
        assert_eq!(limiter.waiting.load(Ordering::SeqCst), 0);
        drop(first);
        let again = limiter.turn().await.unwrap();
        drop(again);
    }

    #[tokio::test]
    async fn name_locks_serialize_one_name_and_are_forgotten() {
        let locks = Arc::new(NameLocks::default());
        let a = locks.lock("a").await;
        // Another name is independent.
        let b = locks.lock("b").await;
        assert_eq!(locks.held(), 2);
        let l2 = Arc::clone(&locks);
        let waiter = tokio::spawn(async move {
            let _a = l2.lock("a").await;
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(a);
        waiter.await.unwrap();
        drop(b);
        assert_eq!(locks.held(), 0);
    }
}
