//! A recording fake `tart` (and a fake `softnet`) for the provider tests.
//!
//! The fake keeps a tiny VM store in its state directory: `clone` makes a
//! VM, `run` marks it running, starts a `softnet` child (a copy of `sleep`
//! named `softnet`, so the process table shows that name) and stays in the
//! foreground like the real `tart run`; `stop` kills the run's process
//! group; `list` reports the store as JSON; `exec` runs the argv for real.
//! Calls are recorded as `call.N` (argv, NUL-terminated); `run`, which
//! races with later calls, records to `run.argv` instead. Canned answers:
//! `resp/<subcommand>.{out,err,code,sleep}` (with `.code` present the
//! canned answer replaces the behaviour); `resp/run.nosoftnet` makes `run`
//! start without Softnet.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use corral_provider_tart::ProcessRunner;

const FAKE_TART: &str = r#"#!/bin/sh
d='@STATE@'
b='@BIN@'
if [ "$1" = run ]; then
  : > "$d/run.argv"
  for a in "$@"; do printf '%s\0' "$a" >> "$d/run.argv"; done
else
  n=$(cat "$d/count" 2>/dev/null || echo 0)
  n=$((n + 1))
  echo "$n" > "$d/count"
  : > "$d/call.$n"
  for a in "$@"; do printf '%s\0' "$a" >> "$d/call.$n"; done
fi
r="$d/resp/$1"
[ -f "$r.sleep" ] && sleep "$(cat "$r.sleep")"
if [ -f "$r.code" ]; then
  [ -f "$r.err" ] && cat "$r.err" >&2
  [ -f "$r.out" ] && cat "$r.out"
  exit "$(cat "$r.code")"
fi
mkdir -p "$d/vms"
case "$1" in
  clone)
    if [ -e "$d/vms/$3" ]; then echo "VM \"$3\" already exists" >&2; exit 1; fi
    : > "$d/vms/$3" ;;
  set)
    [ -e "$d/vms/$2" ] || { echo "the specified VM \"$2\" does not exist" >&2; exit 1; } ;;
  delete)
    rm -f "$d/vms/$2" ;;
  rename)
    [ -e "$d/vms/$2" ] || { echo "the specified VM \"$2\" does not exist" >&2; exit 1; }
    mv "$d/vms/$2" "$d/vms/$3" ;;
  list)
    sep=''
    printf '['
    for f in "$d/vms"/*; do
      [ -e "$f" ] || continue
      vm=$(basename "$f")
      if [ -e "$d/running.$vm" ]; then s=running; r=true; else s=stopped; r=false; fi
      printf '%s{"Source":"local","Name":"%s","State":"%s","Running":%s}' "$sep" "$vm" "$s" "$r"
      sep=','
    done
    printf ']\n' ;;
  run)
    echo "$$" > "$d/run.pid"
    echo "fake tart: booting $2"
    if [ ! -f "$d/resp/run.nosoftnet" ]; then
      "$b/softnet" 300 &
      echo "$!" > "$d/softnet.pid"
    fi
    : > "$d/running.$2"
    sleep 300 &
    wait ;;
  stop)
    rm -f "$d/running.$2"
    [ -f "$d/run.pid" ] && /bin/kill -KILL -- "-$(cat "$d/run.pid")" 2>/dev/null
    : ;;
  ip)
    echo 192.168.64.5 ;;
  exec)
    shift
    [ "$1" = -i ] && shift
    shift
    exec "$@" ;;
esac
exit 0
"#;

pub struct Fake {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    state: PathBuf,
    bin: PathBuf,
}

fn write_exec(path: &Path, body: &str) {
    fs::write(path, body).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

impl Fake {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join("state");
        let bin = root.join("bin");
        fs::create_dir_all(state.join("resp")).unwrap();
        fs::create_dir_all(&bin).unwrap();
        let body = FAKE_TART
            .replace("@STATE@", state.to_str().unwrap())
            .replace("@BIN@", bin.to_str().unwrap());
        write_exec(&bin.join("tart"), &body);
        fs::copy("/bin/sleep", bin.join("softnet")).unwrap();
        Self {
            _tmp: tmp,
            root,
            state,
            bin,
        }
    }

    pub fn runner(&self) -> ProcessRunner {
        ProcessRunner::with_search_path(format!("{}:/usr/bin:/bin", self.bin.display()))
    }

    pub fn remove_softnet(&self) {
        fs::remove_file(self.bin.join("softnet")).unwrap();
    }

    fn resp(&self, name: &str) -> PathBuf {
        self.state.join("resp").join(name)
    }

    /// Answer `sub` with `out`, `err` and exit `code` instead of behaving.
    pub fn canned(&self, sub: &str, out: &str, err: &str, code: i32) {
        fs::write(self.resp(&format!("{sub}.out")), out).unwrap();
        fs::write(self.resp(&format!("{sub}.err")), err).unwrap();
        fs::write(self.resp(&format!("{sub}.code")), code.to_string()).unwrap();
    }

    /// Back to behaving for `sub`.
    pub fn uncan(&self, sub: &str) {
        for ext in ["out", "err", "code", "sleep"] {
            let _ = fs::remove_file(self.resp(&format!("{sub}.{ext}")));
        }
    }

    pub fn sleep(&self, sub: &str, secs: u32) {
        fs::write(self.resp(&format!("{sub}.sleep")), secs.to_string()).unwrap();
    }

    pub fn without_softnet_at_run(&self) {
        fs::write(self.resp("run.nosoftnet"), "").unwrap();
    }

    pub fn count(&self) -> usize {
        fs::read_to_string(self.state.join("count"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    fn words(path: &Path) -> Vec<String> {
        let raw = fs::read(path).unwrap();
        let mut words: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|w| String::from_utf8(w.to_vec()).unwrap())
            .collect();
        words.pop();
        words
    }

    /// Every recorded argv except `run` (without the program), in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        (1..=self.count())
            .map(|n| Self::words(&self.state.join(format!("call.{n}"))))
            .collect()
    }

    /// The argv of the last `run`, if any.
    pub fn run_argv(&self) -> Option<Vec<String>> {
        let path = self.state.join("run.argv");
        path.exists().then(|| Self::words(&path))
    }

    fn pid(&self, file: &str) -> Option<i32> {
        fs::read_to_string(self.state.join(file))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    pub fn softnet_pid(&self) -> Option<i32> {
        self.pid("softnet.pid")
    }

    pub fn run_pid(&self) -> Option<i32> {
        self.pid("run.pid")
    }

    pub fn alive(pid: i32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
            && !fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    pub fn kill(pid: i32) {
        let _ = std::process::Command::new("/bin/kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        // Leave no fake VM processes behind.
        if let Some(pid) = self.run_pid() {
            let _ = std::process::Command::new("/bin/kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}
