//! Memory the benchmarks report: what the kernel says a process holds
//! (`/proc/<pid>/smaps_rollup`: resident and proportional set sizes, in
//! KiB), for this process or for the dnsmasq processes of one state
//! directory.

use std::path::Path;

/// Resident and proportional set size of one process, KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Resident set size.
    pub rss_kib: u64,
    /// Proportional set size (shared pages split among their users).
    pub pss_kib: u64,
}

impl std::ops::Add for Footprint {
    type Output = Footprint;
    fn add(self, o: Footprint) -> Footprint {
        Footprint {
            rss_kib: self.rss_kib + o.rss_kib,
            pss_kib: self.pss_kib + o.pss_kib,
        }
    }
}

/// The footprint of the process whose `/proc` directory is `dir`; `None`
/// when it is gone.
pub fn footprint(dir: &Path) -> Option<Footprint> {
    let rollup = std::fs::read_to_string(dir.join("smaps_rollup")).ok()?;
    let field = |name: &str| {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(Footprint {
        rss_kib: field("Rss:"),
        pss_kib: field("Pss:"),
    })
}

/// This process's footprint.
pub fn own() -> Footprint {
    footprint(Path::new("/proc/self")).unwrap_or_default()
}

/// Threads of this process.
pub fn own_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// The summed footprint of the dnsmasq processes whose command line names
/// `state` (one host's gateways), and how many there are.
pub fn dnsmasq(state: &Path) -> (Footprint, usize) {
    let needle = state.to_string_lossy().into_owned();
    let (mut sum, mut count) = (Footprint::default(), 0);
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return (sum, 0);
    };
    for p in procs.flatten() {
        let dir = p.path();
        let Ok(cmd) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        if !cmd.starts_with("dnsmasq") || !cmd.contains(&needle) {
            continue;
        }
        if let Some(f) = footprint(&dir) {
            sum = sum + f;
            count += 1;
        }
    }
    (sum, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_footprint_and_threads() {
        let f = own();
        assert!(f.rss_kib > 0 && f.pss_kib > 0, "{f:?}");
        assert!(own_threads() >= 1);
        // No dnsmasq names a directory that does not exist.
        let (sum, n) = dnsmasq(Path::new("/nonexistent/corral-memory-test"));
        assert_eq!((sum, n), (Footprint::default(), 0));
    }
}
