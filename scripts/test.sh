#!/usr/bin/env bash
# Runs every test: installs the packages the tests need, installs and starts
# a real Incus daemon with a small local image, then runs the whole workspace
# test suite. Tests that need root, namespaces or Incus fail (never skip)
# when CI=true, which this script sets unless told otherwise.
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
cargo test --workspace --locked --no-fail-fast "$@"
