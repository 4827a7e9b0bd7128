#!/usr/bin/env bash
# Installs what building and running corral needs on Debian 12: the C
# libraries behind the nftables bindings, dnsmasq for the gateway services,
# busybox for the DHCP client used in tests, and nftables (only as the
# benchmark baseline: corral itself never runs `nft`); for the tests, `passwd`
# (useradd: a real second user), `fish` (a non-POSIX login shell) and `curl`
# (an HTTP client run as that second user against corrald's socket, and a TLS
# client against its cluster listener); `openssl` makes cluster certificates
# (scripts/cluster-certs.sh); `prometheus` (a real Prometheus scrapes corrald's
# /metrics in a test); `e2fsprogs` (chattr: a state directory that
# cannot be written, for the apply-record fault test).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_root "installing packages"
apt_install pkg-config libnftnl-dev libmnl-dev gcc libc6-dev \
    dnsmasq-base busybox-static nftables iproute2 util-linux systemd ca-certificates \
    passwd fish curl openssl e2fsprogs prometheus
find_cargo
