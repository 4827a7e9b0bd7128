//! A recording fake `multipass` (and `ssh`) for the provider tests.
//!
//! Each test gets its own directory holding a `bin/` (put first on the
//! runner's PATH) and a `state/` where every call is recorded as
//! `call.N` (argv, NUL-terminated) and `stdin.N`. Canned answers are files
//! `resp/<subcommand>.{out,err,code,sleep}`; `resp/exec.run` makes `exec`
//! run the argv after `--` for real (so exit codes and argv survive).
// Test support: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use corral_provider_multipass::ProcessRunner;

const FAKE_MULTIPASS: &str = r#"#!/bin/sh
d='@STATE@'
n=$(cat "$d/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$d/count"
: > "$d/call.$n"
for a in "$@"; do printf '%s\0' "$a" >> "$d/call.$n"; done
cat > "$d/stdin.$n"
r="$d/resp/$1"
[ -f "$r.sleep" ] && sleep "$(cat "$r.sleep")"
[ -f "$r.err" ] && cat "$r.err" >&2
[ -f "$r.out" ] && cat "$r.out"
if [ "$1" = exec ] && [ -f "$r.run" ]; then
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
  shift
  exec "$@"
fi
if [ -f "$r.code" ]; then exit "$(cat "$r.code")"; fi
exit 0
"#;

/// Behaves like sshd on the far side: options and target dropped, the rest
/// joined with spaces and handed to `sh -c`.
const FAKE_SSH: &str = r#"#!/bin/sh
d='@STATE@'
while [ "$#" -gt 0 ]; do
  case "$1" in
    -o) shift 2 ;;
    *) break ;;
  esac
done
target="$1"; shift
[ "$1" = "--" ] && shift
echo "$target" > "$d/ssh-target"
if [ -f "$d/ssh-fail" ]; then echo "ssh: connect to host $target: Connection refused" >&2; exit 255; fi
exec /bin/sh -c "$*"
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
        let st = state.to_str().unwrap();
        write_exec(
            &bin.join("multipass"),
            &FAKE_MULTIPASS.replace("@STATE@", st),
        );
        write_exec(&bin.join("ssh"), &FAKE_SSH.replace("@STATE@", st));
        Self {
            _tmp: tmp,
            root,
            state,
            bin,
        }
    }

    /// A runner whose PATH starts with the fake binaries.
    pub fn runner(&self) -> ProcessRunner {
        let path = format!("{}:/usr/bin:/bin", self.bin.display());
        ProcessRunner::with_search_path(path)
    }

    /// Answer `sub` with `out` on stdout and exit `code`.
    pub fn respond(&self, sub: &str, out: &str, code: i32) {
        let r = self.state.join("resp");
        fs::write(r.join(format!("{sub}.out")), out).unwrap();
        fs::write(r.join(format!("{sub}.code")), code.to_string()).unwrap();
    }

    /// Answer `sub` on stderr with exit `code`.
    pub fn fail(&self, sub: &str, err: &str, code: i32) {
        let r = self.state.join("resp");
        let _ = fs::remove_file(r.join(format!("{sub}.out")));
        fs::write(r.join(format!("{sub}.err")), err).unwrap();
        fs::write(r.join(format!("{sub}.code")), code.to_string()).unwrap();
    }

    pub fn sleep(&self, sub: &str, secs: u32) {
        fs::write(
            self.state.join("resp").join(format!("{sub}.sleep")),
            secs.to_string(),
        )
        .unwrap();
    }

    pub fn run_exec(&self) {
        fs::write(self.state.join("resp").join("exec.run"), "").unwrap();
    }

    pub fn ssh_fails(&self) {
        fs::write(self.state.join("ssh-fail"), "").unwrap();
    }

    pub fn ssh_target(&self) -> String {
        fs::read_to_string(self.state.join("ssh-target"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// Answer `info` for `vm` with `state`.
    pub fn info_state(&self, vm: &str, state: &str) {
        self.respond(
            "info",
            &format!(
                r#"{{"errors":[],"info":{{"{vm}":{{"state":"{state}","ipv4":["10.99.5.23"]}}}}}}"#
            ),
            0,
        );
    }

    pub fn count(&self) -> usize {
        fs::read_to_string(self.state.join("count"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    /// Every recorded argv (without the program), in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        (1..=self.count())
            .map(|n| {
                let raw = fs::read(self.state.join(format!("call.{n}"))).unwrap();
                let mut words: Vec<String> = raw
                    .split(|b| *b == 0)
                    .map(|w| String::from_utf8(w.to_vec()).unwrap())
                    .collect();
                words.pop();
                words
            })
            .collect()
    }

    pub fn stdin(&self, n: usize) -> Vec<u8> {
        fs::read(self.state.join(format!("stdin.{n}"))).unwrap()
    }
}
