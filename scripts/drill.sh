#!/usr/bin/env bash
# The main job: build corral and run the isolation drill on the built-in
# default profiles. The drill builds its own network namespaces and never
# touches this machine's network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_root "the drill"
"$here/install-deps.sh"
find_cargo
cd "$here/.."
step "building corral (release)"
cargo build --release --locked -p corral-cli
exec ./target/release/corral drill "$@"
