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
"$here/incus-setup.sh"
"$here/incus-image.sh"
find_cargo
cd "$here/.."
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
