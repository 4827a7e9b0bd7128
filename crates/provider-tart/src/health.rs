//! The filter-health signal: is the Softnet process of a VM still running?
//!
//! `tart run` starts Softnet as its child (or, when Softnet is not setuid,
//! as a child of `sudo`). corral reads the process table (`ps`), finds the
//! `tart run <vm>` process it started, and looks for a live `softnet`
//! process below it. An exited process is a dead filter; anything corral
//! cannot establish is [`FilterHealth::Unknown`], which callers must treat
//! as failed.

use std::collections::BTreeMap;

/// The one filter-health type, shared with the verification gate that
/// judges it.
pub use corral_sandbox_core::verify::FilterHealth;

/// The process-table argv (the same flags work with BSD and procps `ps`).
pub fn ps_argv() -> Vec<String> {
    [
        "ps", "-ww", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat=", "-o", "command=",
    ]
    .map(String::from)
    .to_vec()
}

/// One row of the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEntry {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// State letters (`Z` first means a zombie: exited).
    pub stat: String,
    /// Command line.
    pub command: String,
}

impl ProcessEntry {
    fn exited(&self) -> bool {
        self.stat.starts_with('Z')
    }

    fn words(&self) -> impl Iterator<Item = &str> {
        self.command.split_whitespace()
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Why `ps` output could not be read as a process table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PsError {
    /// A line lacks a column `ps_argv` asks for.
    #[error("`ps` line `{line}` has no {column}; expected `PID PPID STAT COMMAND`")]
    MissingColumn {
        /// The line as `ps` printed it.
        line: String,
        /// `pid`, `ppid` or `state`.
        column: &'static str,
    },
    /// `ps` printed no process at all.
    #[error("the process table `ps` printed is empty")]
    Empty,
}

/// Parse `ps` output as produced by [`ps_argv`].
pub fn parse_ps(text: &str) -> Result<Vec<ProcessEntry>, PsError> {
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.split_whitespace();
        let missing = |column: &'static str| PsError::MissingColumn {
            line: line.to_owned(),
            column,
        };
        let mut number = |column: &'static str| -> Result<u32, PsError> {
            parts
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| missing(column))
        };
        let pid = number("pid")?;
        let ppid = number("ppid")?;
        let stat = parts.next().ok_or_else(|| missing("state"))?.to_owned();
        let command = parts.collect::<Vec<_>>().join(" ");
        rows.push(ProcessEntry {
            pid,
            ppid,
            stat,
            command,
        });
    }
    if rows.is_empty() {
        return Err(PsError::Empty);
    }
    Ok(rows)
}

/// Is `command` `tart run <vm>` (possibly behind an interpreter)?
fn is_tart_run(entry: &ProcessEntry, vm: &str) -> bool {
    let words: Vec<&str> = entry.words().collect();
    words
        .iter()
        .position(|w| basename(w) == "tart")
        .is_some_and(|i| words.get(i + 1) == Some(&"run") && words.get(i + 2) == Some(&vm))
}

/// True when `pid` is a live `tart run <vm>` in `table` (guards against
/// acting on a recycled pid).
pub fn is_tart_run_of(table: &[ProcessEntry], pid: u32, vm: &str) -> bool {
    table
        .iter()
        .any(|e| e.pid == pid && !e.exited() && is_tart_run(e, vm))
}

/// Judge the filter of `vm`, whose `tart run` corral started as `tart_pid`.
pub fn assess(table: &[ProcessEntry], tart_pid: u32, vm: &str) -> FilterHealth {
    let Some(tart) = table.iter().find(|e| e.pid == tart_pid) else {
        return FilterHealth::Dead {
            reason: format!("`tart run {vm}` (pid {tart_pid}) has exited"),
        };
    };
    if tart.exited() {
        return FilterHealth::Dead {
            reason: format!("`tart run {vm}` (pid {tart_pid}) has exited"),
        };
    }
    if !is_tart_run(tart, vm) {
        return FilterHealth::Dead {
            reason: format!(
                "pid {tart_pid} is no longer `tart run {vm}` (it is `{}`)",
                tart.command
            ),
        };
    }
    let mut children: BTreeMap<u32, Vec<&ProcessEntry>> = BTreeMap::new();
    for e in table {
        children.entry(e.ppid).or_default().push(e);
    }
    let mut queue = vec![tart_pid];
    let mut seen = 0;
    while let Some(pid) = queue.pop() {
        // A cycle in a corrupt table must not spin forever.
        seen += 1;
        if seen > table.len() {
            return FilterHealth::Unknown {
                reason: "the process table has a parent cycle".to_owned(),
            };
        }
        for child in children.get(&pid).into_iter().flatten() {
            let is_softnet = child
                .words()
                .next()
                .is_some_and(|w| basename(w) == "softnet");
            if is_softnet && !child.exited() {
                return FilterHealth::Alive;
            }
            queue.push(child.pid);
        }
    }
    FilterHealth::Dead {
        reason: format!("no running softnet process under `tart run {vm}` (pid {tart_pid})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "    1     0 Ss   /sbin/launchd
  500     1 S    /opt/homebrew/bin/tart run corral-a --no-graphics --net-softnet --net-softnet-block=0.0.0.0/0
  501   500 S    sudo --non-interactive softnet --vm-fd 3
  502   501 S    /opt/homebrew/bin/softnet --vm-fd 3 --vm-mac-address 52:54:00:00:00:01
  600     1 S    /opt/homebrew/bin/tart run corral-b --no-graphics --net-softnet
  601   600 Z    (softnet)
  700     1 S    /bin/sh /tmp/x/bin/tart run corral-c --no-graphics
  701   700 S    /tmp/x/bin/softnet 300
";

    fn table() -> Vec<ProcessEntry> {
        parse_ps(TABLE).unwrap()
    }

    #[test]
    fn alive_through_sudo_and_behind_an_interpreter() {
        assert_eq!(assess(&table(), 500, "corral-a"), FilterHealth::Alive);
        assert_eq!(assess(&table(), 700, "corral-c"), FilterHealth::Alive);
    }

    #[test]
    fn exited_softnet_is_dead() {
        let h = assess(&table(), 600, "corral-b");
        assert!(matches!(h, FilterHealth::Dead { .. }), "{h}");
        assert!(!h.is_alive());
    }

    #[test]
    fn exited_or_reused_tart_pid_is_dead() {
        assert!(matches!(
            assess(&table(), 999, "corral-a"),
            FilterHealth::Dead { .. }
        ));
        // pid 1 exists but is not tart run corral-a.
        let h = assess(&table(), 1, "corral-a");
        assert!(h.to_string().contains("no longer"), "{h}");
        // Right pid, wrong VM.
        assert!(matches!(
            assess(&table(), 500, "corral-b"),
            FilterHealth::Dead { .. }
        ));
    }

    #[test]
    fn unknown_is_not_alive() {
        let h = FilterHealth::Unknown {
            reason: "ps failed".into(),
        };
        assert!(!h.is_alive());
    }

    #[test]
    fn malformed_tables_are_errors() {
        assert!(parse_ps("").is_err());
        assert!(parse_ps("abc def S x").is_err());
        assert!(parse_ps("1 2").is_err());
    }

    #[test]
    fn cycles_do_not_hang() {
        let t = parse_ps("5 6 S /bin/tart run v\n6 5 S x\n").unwrap();
        let h = assess(&t, 5, "v");
        assert!(!h.is_alive());
    }
}
