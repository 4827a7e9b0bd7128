# Shared helpers for corral's scripts (sourced, not run).

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
step() { printf '==> %s\n' "$*" >&2; }

need_root() {
    [ "$(id -u)" = 0 ] || die "$1 needs root (network namespaces, nftables, Incus): run it with sudo"
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
