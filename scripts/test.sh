#!/usr/bin/env bash
# Runs every test: installs the packages the tests need, installs and starts
# a real Incus daemon with a small local image, then runs the whole workspace
# test suite and prints "N passed, M failed, K skipped". Tests that need
# root, namespaces, Incus or systemd tools fail (never skip) under a truthy
# CI (true, 1, yes), which this script sets unless told otherwise; with
# CI=false they skip, and each skip is counted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_root "the test suite"
export CI="${CI:-true}"
"$here/install-deps.sh"
"$here/ocsf-venv.sh"
"$here/incus-setup.sh"
"$here/incus-image.sh"
find_cargo
cd "$here/.."
# The host-namespace tests (real Incus containers on a corral bridge) refuse
# to replace a live `table inet corral`, so a host left with corral's state
# (an earlier `corral host apply`, or a test run that was killed) would fail
# them. This run owns the host: tear that state down first and say so.
# CORRAL_TEST_KEEP_HOST=1 refuses instead of tearing down.
HOST_LOCK=/run/lock/corral-tests-host-netns.lock # corral_test_support::host_lock::PATH
# The check and the teardown hold the lock every host-namespace test holds
# for its whole run, so state a running test of another suite owns is never
# mistaken for stale.
cargo build --locked -q -p corral-cli --bin corral
mkdir -p "$(dirname "$HOST_LOCK")"
exec 9>"$HOST_LOCK"
flock 9
if corral_state_live; then
    [ "${CORRAL_TEST_KEEP_HOST:-0}" = 1 ] &&
        die "this host has live corral state (nftables tables or corral-stamped bridges) and CORRAL_TEST_KEEP_HOST=1: run \`corral host teardown\` first"
    step "this host has live corral state: tearing it down for the tests (re-run \`corral host apply\` afterwards to restore it)"
    target/debug/corral host teardown --force
fi
flock -u 9
exec 9>&-
step "running the test suite"
skips=$(mktemp)
log=$(mktemp)
trap 'rm -f "$skips" "$log"' EXIT
set +e
CORRAL_SKIP_LOG="$skips" cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# libtest counts a skipped test as passed: take the skips out.
summary=$(awk -v skipped="$(wc -l <"$skips")" '
    /^test result:/ { passed += $4; failed += $6 }
    END { printf "%d passed, %d failed, %d skipped", passed - skipped, failed, skipped }' "$log")
if [ -s "$skips" ]; then
    step "skipped tests (they did not run):"
    sed 's/^/    /' "$skips" >&2
fi
step "$summary"
exit "$status"
