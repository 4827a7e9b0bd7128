# Shared helpers for corral's scripts (sourced, not run).

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
step() { printf '==> %s\n' "$*" >&2; }

need_root() {
    [ "$(id -u)" = 0 ] || die "$1 needs root (network namespaces, nftables, Incus): run it as root (or with sudo)"
}

# Cargo may live in the invoking user's home when run through sudo.
find_cargo() {
    if command -v cargo >/dev/null 2>&1; then return 0; fi
    for home in "${SUDO_USER:+$(getent passwd "$SUDO_USER" | cut -d: -f6)}" "$HOME" /root; do
        if [ -n "$home" ] && [ -x "$home/.cargo/bin/cargo" ]; then
            export PATH="$home/.cargo/bin:$PATH"
            export RUSTUP_HOME="${RUSTUP_HOME:-$home/.rustup}"
            export CARGO_HOME="${CARGO_HOME:-$home/.cargo}"
            return 0
        fi
    done
    die "cargo not found: install the Rust toolchain (rustup) first; corral needs Rust 1.95"
}

# Install Debian packages that are not installed yet; `apt-get update` only
# when something is missing, so a second run takes no network at all.
apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    step "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# True when this host's network namespace has corral's nftables tables or a
# bridge carrying corral's stamp (the alias `corral:managed:v1`). `nft list
# table` exits 1 for a missing table; any other status (0, or an abort of
# an nft too old to print a set) means the table is there.
corral_state_live() {
    local family status
    for family in inet bridge; do
        status=0
        nft list table "$family" corral >/dev/null 2>&1 || status=$?
        [ "$status" != 1 ] && return 0
    done
    ip -o link show type bridge 2>/dev/null | grep -q 'alias corral:managed:v1'
}
