#!/usr/bin/env bash
# Build the tiny busybox container image corral's Incus tests use, and import
# it under the alias `corral-test` into the `corral` project, `default` (for
# the CLI baseline of the benchmark) and `corral-mounts` (the mount tests'
# project, whose disk-path allowlist differs from `corral`'s). No image server is needed: the
# rootfs is Debian's static busybox plus a few files.
#
# Idempotent: an alias holding the current image version is left alone (< 1 s).
#
#   scripts/incus-image.sh                  # alias corral-test, project corral
#
# Environment:
#   CORRAL_IMAGE_ALIAS    alias to import under (default corral-test)
#   CORRAL_INCUS_PROJECT  corral's project (default corral)
set -euo pipefail

log() { printf 'incus-image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
command -v incus >/dev/null || die "incus is not installed; run scripts/incus-setup.sh first"

ALIAS=${CORRAL_IMAGE_ALIAS:-corral-test}
PROJECT=${CORRAL_INCUS_PROJECT:-corral}
MOUNT_TEST_PROJECT=corral-mounts

# The static build: the rootfs has no libc for a dynamic one to load.
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
    log "installing busybox-static"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
fi

# corral's provider converges the project's full configuration on start; the
# image only needs the project to exist with its own image store, which is
# exactly the feature set the provider creates it with.
ensure_project() {
    local project=$1
    [ "$project" = default ] && return
    if ! incus project show "$project" >/dev/null 2>&1; then
        log "creating project $project (own images and profiles)"
        incus project create "$project" -c features.images=true -c features.profiles=true \
            -c features.storage.volumes=true -c features.networks=false >/dev/null
    fi
}

# Bump when the image's content changes: an older image under the alias is
# replaced, so every machine tests the same image.
IMAGE_VERSION=2

has_alias() {
    incus image alias list --project "$1" --format csv 2>/dev/null | cut -d, -f1 | grep -qx "$ALIAS"
}

is_current() {
    incus image show "$ALIAS" --project "$1" 2>/dev/null |
        grep -Eq "corral_image_version: \"?$IMAGE_VERSION\"?$"
}

work=""
tarball=""
build_image() {
    [ -n "$tarball" ] && return
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    local root=$work/rootfs
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc/init.d,dev,proc,sys,tmp,root,run,var/log,home}
    chmod 1777 "$root/tmp"
    cp /bin/busybox "$root/bin/busybox"
    # `--install -s` inside a chroot writes absolute /bin/busybox links.
    chroot "$root" /bin/busybox --install -s
    cat >"$root/etc/inittab" <<'EOF'
::sysinit:/etc/init.d/rcS
::shutdown:/bin/sync
EOF
    cat >"$root/etc/init.d/rcS" <<'EOF'
#!/bin/sh
hostname -F /etc/hostname 2>/dev/null || true
ip link set lo up 2>/dev/null || true
# A sandbox gets its address from its profile's gateway (corral's dnsmasq)
# without anyone typing udhcpc. In the background: init must not wait for a
# bridge that has no DHCP server (tests that assign static addresses).
if [ -e /sys/class/net/eth0 ]; then
    ip link set eth0 up
    udhcpc -i eth0 -f -t 10 -T 1 -A 2 -s /etc/udhcpc.script >/var/log/udhcpc.log 2>&1 &
fi
EOF
    chmod 0755 "$root/etc/init.d/rcS"
    # udhcpc's event script: address, default route and resolver from the
    # lease. It only ever removes the address it added itself, so a static
    # address a test assigns is never flushed.
    cat >"$root/etc/udhcpc.script" <<'EOF'
#!/bin/sh
state=/run/udhcpc.$interface
case "$1" in
    deconfig)
        if [ -f "$state" ]; then
            ip addr del "$(cat "$state")" dev "$interface" 2>/dev/null
            rm -f "$state"
        fi
        ;;
    bound|renew)
        new="$ip/${mask:-24}"
        if [ -f "$state" ] && [ "$(cat "$state")" != "$new" ]; then
            ip addr del "$(cat "$state")" dev "$interface" 2>/dev/null
        fi
        ip addr replace "$new" dev "$interface"
        echo "$new" >"$state"
        for r in $router; do
            ip route replace default via "$r" dev "$interface"
            break
        done
        : >/etc/resolv.conf
        for d in $dns; do
            echo "nameserver $d" >>/etc/resolv.conf
        done
        ;;
esac
exit 0
EOF
    chmod 0755 "$root/etc/udhcpc.script"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    printf 'corral-test\n' >"$root/etc/hostname"
    # A fixed identity so tests can see a clone get a fresh one.
    printf '0123456789abcdef0123456789abcdef\n' >"$root/etc/machine-id"
    cat >"$work/metadata.yaml" <<EOF
architecture: $(uname -m)
creation_date: $(date +%s)
properties:
  description: corral test image (busybox, DHCP client at boot)
  os: busybox
  release: "1"
  corral_image_version: "$IMAGE_VERSION"
EOF
    tarball=$work/corral-test.tar.gz
    tar -C "$work" -czf "$tarball" metadata.yaml rootfs
}

for project in "$PROJECT" "$MOUNT_TEST_PROJECT" default; do
    ensure_project "$project"
    if has_alias "$project"; then
        if is_current "$project"; then
            continue
        fi
        log "replacing an older $ALIAS in project $project"
        incus image delete "$ALIAS" --project "$project" >/dev/null
    fi
    build_image
    log "importing $ALIAS into project $project"
    incus image import "$tarball" --alias "$ALIAS" --project "$project" >/dev/null
done
log "ready: image $ALIAS in projects $PROJECT, $MOUNT_TEST_PROJECT and default"
