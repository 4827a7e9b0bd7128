#!/usr/bin/env bash
# Install (if needed) and start (if needed) a local Incus daemon for corral's
# tests and CI, on a Debian 12 machine without systemd as PID 1.
#
# Idempotent: every step checks first and does nothing when already done, so
# a second run takes well under a second.
#
#   scripts/incus-setup.sh            # install, start, preseed
#
# Environment:
#   CORRAL_INCUS_LOG   daemon log file (default /var/log/incus/corral-incusd.log)
#   CORRAL_INCUS_POOL  storage pool name (default "default", driver dir)
set -euo pipefail

log() { printf 'incus-setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts incusd)"

SOCKET=/var/lib/incus/unix.socket
LOG_FILE=${CORRAL_INCUS_LOG:-/var/log/incus/corral-incusd.log}
POOL=${CORRAL_INCUS_POOL:-default}
BACKPORTS_LIST=/etc/apt/sources.list.d/corral-bookworm-backports.sources

# The mirror already configured for the main suite; we never name a host here.
mirror_uri() {
    local src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ]; then
        awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$src"
        return
    fi
    # Older layout: one-line entries in sources.list.
    awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null
}

install_incus() {
    if command -v incusd >/dev/null 2>&1 || [ -x /usr/lib/incus/incusd ] || [ -x /usr/libexec/incus/incusd ]; then
        return
    fi
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        local uri
        uri=$(mirror_uri)
        [ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources; add bookworm-backports by hand"
        log "enabling bookworm-backports from the configured mirror"
        cat >"$BACKPORTS_LIST" <<EOF
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    log "installing incus-base from bookworm-backports"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports incus-base >/dev/null
}

incusd_bin() {
    local candidate
    for candidate in "$(command -v incusd 2>/dev/null || true)" /usr/lib/incus/incusd /usr/libexec/incus/incusd /usr/sbin/incusd; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            printf '%s\n' "$candidate"
            return
        fi
    done
    die "incusd not found after install"
}

daemon_answers() {
    [ -S "$SOCKET" ] && incus query /1.0 >/dev/null 2>&1
}

# A daemon started from a directory that was removed since (an old
# checkout) cannot snapshot: rsync fails in getcwd(). Restart it from `/`.
cwd_gone() {
    local pid
    pid=$(incus query /1.0 2>/dev/null | grep -o '"server_pid": *[0-9]*' | grep -o '[0-9]*$') || return 1
    readlink "/proc/$pid/cwd" 2>/dev/null | grep -q ' (deleted)$'
}

start_daemon() {
    if daemon_answers && cwd_gone; then
        log "the running incusd works in a removed directory: restarting it"
        incus admin shutdown --timeout 60 >/dev/null 2>&1 || pkill -x incusd || true
        for _ in $(seq 1 100); do pgrep -x incusd >/dev/null || break; sleep 0.1; done
    fi
    if daemon_answers; then
        return
    fi
    local bin
    bin=$(incusd_bin)
    mkdir -p "$(dirname "$LOG_FILE")"
    log "starting $bin (log: $LOG_FILE)"
    # No systemd here: detach it ourselves so it outlives this script. It
    # starts in `/`: the tools it runs (rsync for snapshots) inherit its
    # working directory, and a checkout removed later would break them.
    (cd / && exec setsid "$bin" --group root --logfile="$LOG_FILE") </dev/null >>"$LOG_FILE" 2>&1 &
    "$bin" waitready --timeout=60 || die "incusd did not become ready; see $LOG_FILE"
}

preseed() {
    if incus storage show "$POOL" >/dev/null 2>&1; then
        return
    fi
    log "preseeding a dir storage pool \`$POOL\`"
    incus admin init --preseed <<EOF
config:
  images.auto_update_interval: "0"
storage_pools:
- name: $POOL
  driver: dir
EOF
}

install_incus
start_daemon
preseed
# Images never refresh from a server (there is none reachable); set it even
# when the pool already existed.
incus config set images.auto_update_interval 0
log "ready: $(incus query /1.0 | grep -o '"server_version": *"[^"]*"' || true)"
