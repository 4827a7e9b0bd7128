//! A recording fake `multipass` (and `ssh`) for the provider tests, on
//! the shared harness of `corral-provider-support` (feature `test-support`).
//!
//! Each test gets its own directory holding a `bin/` (put first on the
//! runner's PATH) and a `state/` where every call is recorded as
//! `call.N` (argv, NUL-terminated) and `stdin.N`. Canned answers are files
//! `resp/<subcommand>.{out,err,code,sleep}`; `resp/exec.run` makes `exec`
//! run the argv after `--` for real (so exit codes and argv survive).
// Test support: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::ops::Deref;

use corral_provider_support::testing::FakeTool;

const FAKE_MULTIPASS: &str = r#"#!/bin/sh
d='@STATE@'
@RECORD@
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

/// The shared harness with a fake `multipass` and `ssh` installed; it
/// derefs to [`FakeTool`] for `runner`, `calls`, `count`, `sleep`, `root`.
pub struct Fake {
    tool: FakeTool,
}

impl Deref for Fake {
    type Target = FakeTool;
    fn deref(&self) -> &FakeTool {
        &self.tool
    }
}

impl Fake {
    pub fn new() -> Self {
        let tool = FakeTool::new();
        tool.install("multipass", FAKE_MULTIPASS);
        tool.install("ssh", FAKE_SSH);
        Self { tool }
    }

    pub fn run_exec(&self) {
        fs::write(self.resp("exec.run"), "").unwrap();
    }

    pub fn ssh_fails(&self) {
        fs::write(self.state().join("ssh-fail"), "").unwrap();
    }

    pub fn ssh_target(&self) -> String {
        fs::read_to_string(self.state().join("ssh-target"))
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

    pub fn stdin(&self, n: usize) -> Vec<u8> {
        fs::read(self.state().join(format!("stdin.{n}"))).unwrap()
    }
}
