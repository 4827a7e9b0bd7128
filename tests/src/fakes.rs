//! Stateful, recording stand-ins for the `multipass` and `tart` command
//! line tools, which cannot run on corral's Linux build machines.
//!
//! Unlike the canned-answer fakes in the provider crates' own tests, these
//! keep a small instance store, so the conformance scenario can drive a
//! whole lifecycle through them:
//! - fake `multipass`: `launch`, `info`/`list`/`snapshots` as JSON, `start`,
//!   `stop`, `restart`, `snapshot` and `restore` (stopped instances only,
//!   like Multipass), snapshot and instance `delete --purge`, `clone`
//!   (stopped only), and `exec`, which runs the argv after `--` for real
//!   with the instance's own home directory (copied by snapshots and
//!   clones) as the default working directory. A running instance reports
//!   10.99.5.23, or the address in `state/ipv4` when a test writes one.
//! - fake `tart`: the provider crate's own fake script, included from
//!   `crates/provider-tart/tests/fake/tart.sh` (clone/set/run/stop/list/
//!   rename/delete/ip/exec, with a `softnet` process beside each `run`).
//!
//! Both run on the recording harness of `corral-provider-support`
//! (feature `test-support`): every call is recorded as `call.N` (the argv,
//! NUL-terminated), so a test can show exactly which commands corral ran. Nothing here is the real
//! tool: passing against a fake proves the provider's side of the contract
//! (argv, state handling, error mapping), not Multipass's or Tart's.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use corral_provider_support::testing::FakeTool as Harness;

const FAKE_MULTIPASS: &str = r#"#!/bin/sh
d='@STATE@'
@RECORD@
v="$d/vms"
mkdir -p "$v"
need() { [ -d "$v/$1" ] || { echo "$2 failed: instance \"$1\" does not exist" >&2; exit 2; }; }
state() { cat "$v/$1/state"; }
stopped() { [ "$(state "$1")" = Stopped ] || { echo "$2 failed: instance \"$1\" must be stopped" >&2; exit 2; }; }
sub=$1
shift
case "$sub" in
launch)
  vm=''; ci=''
  while [ "$#" -gt 1 ]; do
    case "$1" in
      --name) vm=$2; shift 2 ;;
      --cloud-init) ci=$2; shift 2 ;;
      --cpus|--memory|--disk|--network) shift 2 ;;
      *) echo "launch failed: unknown option $1" >&2; exit 2 ;;
    esac
  done
  [ "$#" -eq 1 ] || { echo "launch failed: give exactly one image" >&2; exit 2; }
  [ -n "$vm" ] || { echo "launch failed: no --name" >&2; exit 2; }
  [ -d "$v/$vm" ] && { echo "launch failed: instance \"$vm\" already exists" >&2; exit 2; }
  [ "$ci" = - ] && cat > /dev/null
  mkdir -p "$v/$vm/home" "$v/$vm/snaps"
  echo Running > "$v/$vm/state" ;;
info)
  need "$1" info
  s=$(state "$1"); ip='[]'; a=10.99.5.23; [ -f "$d/ipv4" ] && a=$(cat "$d/ipv4")
  [ "$s" = Running ] && ip="[\"$a\"]"
  printf '{"errors":[],"info":{"%s":{"state":"%s","ipv4":%s}}}\n' "$1" "$s" "$ip" ;;
list)
  printf '{"list":['; sep=''
  for p in "$v"/*; do
    [ -d "$p" ] || continue
    vm=$(basename "$p")
    printf '%s{"name":"%s","state":"%s","ipv4":[]}' "$sep" "$vm" "$(state "$vm")"; sep=','
  done
  printf ']}\n' ;;
start|restart)
  need "$1" "$sub"; echo Running > "$v/$1/state" ;;
stop)
  [ "$1" = --force ] && shift
  need "$1" stop; echo Stopped > "$v/$1/state" ;;
snapshot)
  s=$2; vm=$3
  need "$vm" snapshot; stopped "$vm" snapshot
  [ -d "$v/$vm/snaps/$s" ] && { echo "snapshot failed: snapshot \"$s\" already exists" >&2; exit 2; }
  cp -a "$v/$vm/home" "$v/$vm/snaps/$s" ;;
restore)
  t=$2; vm=${t%.*}; s=${t##*.}
  need "$vm" restore; stopped "$vm" restore
  [ -d "$v/$vm/snaps/$s" ] || { echo "restore failed: snapshot \"$s\" does not exist" >&2; exit 2; }
  rm -rf "$v/$vm/home"; cp -a "$v/$vm/snaps/$s" "$v/$vm/home" ;;
snapshots)
  printf '{"errors":[],"info":{'; sep=''
  for p in "$v"/*; do
    [ -d "$p" ] || continue
    printf '%s"%s":{' "$sep" "$(basename "$p")"; sep=','; s2=''
    for q in "$p"/snaps/*; do
      [ -d "$q" ] || continue
      printf '%s"%s":{"comment":"","parent":""}' "$s2" "$(basename "$q")"; s2=','
    done
    printf '}'
  done
  printf '}}\n' ;;
delete)
  [ "$1" = --purge ] && shift
  case "$1" in
    *.*)
      vm=${1%.*}; s=${1##*.}
      need "$vm" delete
      [ -d "$v/$vm/snaps/$s" ] || { echo "delete failed: snapshot \"$s\" does not exist" >&2; exit 2; }
      rm -rf "$v/$vm/snaps/$s" ;;
    *) need "$1" delete; rm -rf "$v/$1" ;;
  esac ;;
clone)
  t=$2; src=$3
  need "$src" clone; stopped "$src" clone
  [ -d "$v/$t" ] && { echo "clone failed: instance \"$t\" already exists" >&2; exit 2; }
  mkdir -p "$v/$t/snaps"; cp -a "$v/$src/home" "$v/$t/home"; echo Stopped > "$v/$t/state" ;;
exec)
  vm=$1; shift
  need "$vm" exec
  [ "$(state "$vm")" = Running ] || { echo "exec failed: instance \"$vm\" is not running" >&2; exit 2; }
  cd "$v/$vm/home" || exit 2
  if [ "$1" = --working-directory ]; then cd "$2" || exit 2; shift 2; fi
  [ "$1" = -- ] && shift
  exec "$@" ;;
*)
  echo "fake multipass: unknown command $sub" >&2; exit 2 ;;
esac
"#;

// The provider crate's fake, so both suites drive the same script.
const FAKE_TART: &str = include_str!("../../crates/provider-tart/tests/fake/tart.sh");

/// One fake tool on the shared recording harness: a private directory
/// with `bin/` (for the runner's PATH) and `state/` (the instance store and
/// the recorded calls). It derefs to the harness for `calls`, `count`,
/// `bin`, `state`, `root`. Setup failures panic: this is test support.
#[derive(Debug)]
pub struct FakeTool {
    tool: Harness,
}

impl Deref for FakeTool {
    type Target = Harness;
    fn deref(&self) -> &Harness {
        &self.tool
    }
}

impl FakeTool {
    fn with(name: &str, script: &str) -> Self {
        let tool = Harness::new();
        tool.install(name, script);
        Self { tool }
    }

    /// A stateful fake `multipass`.
    pub fn multipass() -> Self {
        Self::with("multipass", FAKE_MULTIPASS)
    }

    /// A fake `tart`, with a fake `softnet` (a copy of `sleep`, so the
    /// process table shows that name) beside it.
    pub fn tart() -> Self {
        let fake = Self::with("tart", FAKE_TART);
        fake.install_copy("softnet", Path::new("/bin/sleep"));
        fake
    }

    /// PATH for the provider's process runner: the fakes first.
    pub fn search_path(&self) -> String {
        format!("{}:/usr/bin:/bin", self.bin().display())
    }

    /// A private directory for the provider's staging root.
    pub fn staging(&self) -> PathBuf {
        self.root.join("staging")
    }

    /// The subcommands called, in order (`["launch", "stop", "info", …]`).
    pub fn subcommands(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| c.into_iter().next())
            .collect()
    }
}

impl Drop for FakeTool {
    fn drop(&mut self) {
        // A fake `tart run` stays in the foreground like the real one; leave
        // no such process (or its softnet) behind.
        if let Some(pid) = self.read_pid("run.pid") {
            let _ = std::process::Command::new("/bin/kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run(fake: &FakeTool, prog: &str, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(fake.bin().join(prog))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn fake_multipass_keeps_state_and_records_calls() {
        let fake = FakeTool::multipass();
        assert_eq!(run(&fake, "multipass", &["info", "vm1"]).0, 2);
        let (code, _, err) = run(&fake, "multipass", &["launch", "--name", "vm1", "24.04"]);
        assert_eq!(code, 0, "{err}");
        let (_, out, _) = run(&fake, "multipass", &["info", "vm1", "--format", "json"]);
        assert!(out.contains(r#""vm1":{"state":"Running""#), "{out}");
        // Snapshots need a stopped instance, like Multipass.
        let (code, _, err) = run(&fake, "multipass", &["snapshot", "--name", "s1", "vm1"]);
        assert_eq!(code, 2);
        assert!(err.contains("must be stopped"), "{err}");
        run(&fake, "multipass", &["stop", "vm1"]);
        assert_eq!(
            run(&fake, "multipass", &["snapshot", "--name", "s1", "vm1"]).0,
            0
        );
        let (_, out, _) = run(&fake, "multipass", &["snapshots", "--format", "json"]);
        assert!(out.contains(r#""vm1":{"s1":"#), "{out}");
        let calls = fake.subcommands();
        assert_eq!(
            calls,
            [
                "info",
                "launch",
                "info",
                "snapshot",
                "stop",
                "snapshot",
                "snapshots"
            ]
        );
    }

    #[test]
    fn fake_multipass_exec_runs_in_the_instance_home() {
        let fake = FakeTool::multipass();
        run(&fake, "multipass", &["launch", "--name", "vm1", "24.04"]);
        run(
            &fake,
            "multipass",
            &["exec", "vm1", "--", "sh", "-c", "echo x > f"],
        );
        let (_, out, _) = run(&fake, "multipass", &["exec", "vm1", "--", "cat", "f"]);
        assert_eq!(out, "x\n");
        let (_, out, _) = run(
            &fake,
            "multipass",
            &["exec", "vm1", "--working-directory", "/", "--", "pwd"],
        );
        assert_eq!(out, "/\n");
        run(&fake, "multipass", &["stop", "vm1"]);
        let (code, _, err) = run(&fake, "multipass", &["exec", "vm1", "--", "true"]);
        assert_eq!(code, 2);
        assert!(err.contains("not running"), "{err}");
    }
}
