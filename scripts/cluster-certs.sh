#!/usr/bin/env bash
# Makes the certificates corrald instances of one Incus cluster authenticate
# each other with (docs/cluster.md, "Certificates"):
#
#   scripts/cluster-certs.sh DIR MEMBER...
#
# DIR/ca.pem, DIR/ca.key   the cluster CA (made once; reused when present,
#                          so a member can be added later)
# DIR/MEMBER.pem           MEMBER's certificate, signed by the CA, naming
#                          MEMBER (subjectAltName DNS:MEMBER), usable as a
#                          TLS server and as a TLS client certificate
# DIR/MEMBER.key           its private key
#
# Keys are ECDSA P-256, mode 0600; certificates 0644. Each CA's name carries
# a random tag, so a certificate of another cluster's CA is "unknown CA". An existing member's
# files are never overwritten (remove them to re-issue). Copy ca.pem,
# MEMBER.pem and MEMBER.key to MEMBER, owned by the user corrald runs as;
# ca.key stays off the members.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -ge 2 ] || die "usage: $0 DIR MEMBER... (e.g. $0 /etc/corral/cluster m1 m2)"
command -v openssl >/dev/null 2>&1 || die "openssl not found: install it (scripts/install-deps.sh, or apt-get install openssl)"
dir=$1
shift
for m in "$@"; do
    [[ $m =~ ^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$ ]] ||
        die "\`$m\` is not an Incus member name (letters, digits, \`-\`, \`.\`; at most 63)"
    for f in "$dir/$m.pem" "$dir/$m.key"; do
        [ ! -e "$f" ] || die "$f exists; remove $dir/$m.pem and $dir/$m.key to issue $m a new certificate"
    done
done

umask 077
mkdir -p "$dir"
ca_days=3650
member_days=825

if [ ! -e "$dir/ca.pem" ]; then
    [ ! -e "$dir/ca.key" ] || die "$dir/ca.key exists without $dir/ca.pem: move it away first"
    step "making the cluster CA in $dir"
    openssl req -x509 -new -nodes -days "$ca_days" \
        -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" \
        -subj "/CN=corral cluster CA $(openssl rand -hex 4)" \
        -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    chmod 0600 "$dir/ca.key"
    chmod 0644 "$dir/ca.pem"
else
    [ -e "$dir/ca.key" ] || die "$dir/ca.pem exists but $dir/ca.key does not: cannot sign with it"
    step "reusing the cluster CA in $dir"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for m in "$@"; do
    step "issuing $m's certificate (DNS:$m, server and client)"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/$m.key" 2>/dev/null
    chmod 0600 "$dir/$m.key"
    openssl req -new -key "$dir/$m.key" -subj "/CN=$m" -out "$work/$m.csr"
    cat >"$work/$m.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:$m
EOF
    openssl x509 -req -in "$work/$m.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days "$member_days" \
        -extfile "$work/$m.ext" -out "$dir/$m.pem" 2>/dev/null
    chmod 0644 "$dir/$m.pem"
    openssl verify -CAfile "$dir/ca.pem" "$dir/$m.pem" >/dev/null ||
        die "$dir/$m.pem does not verify against $dir/ca.pem"
done
step "done: give each member ca.pem, MEMBER.pem and MEMBER.key (chown to corrald's user; keep ca.key elsewhere)"
