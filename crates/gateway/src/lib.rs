//! `corral-gateway`: gateway services on every profile bridge: DHCP, and a resolver on the
//! gateway address, served by one dnsmasq per bridge that corral configures
//! and supervises (config, pid file, leases and log in
//! `<state>/gateway/<bridge>/`).
//!
//! - `allowlist` profiles: the resolver answers only allowlisted names
//!   (exact for host entries, strict subdomains for `*.suffix` entries),
//!   NXDOMAIN for everything else, never forwarded; every A/AAAA answer it
//!   forwards is added to the profile's nft set.
//! - `internet` profiles: a forwarder to the host's upstream resolvers.
//! - `none` profiles and `dns = "off"`: leases only (`port=0`).
//! - `dns = "corral"` (allowlist and internet profiles): no dnsmasq;
//!   corral's own gateway ([`HostedGateway`]: [`resolver`], [`dhcp`],
//!   [`advertiser`]) serves the bridge from the process of corrald or
//!   `corral host watch`.
//!
//! # Contract with the plan (`plan`, `nft`)
//!
//! dnsmasq's nftset adds to `table inet corral`, to one learned set per
//! (protocol, ports) class of the profile's host and wildcard entries and
//! per family (`<profile>-dns4-tcp-443`, `<profile>-dns6`, ...; see
//! [`NameRules::set_lines`]): each domain's answers feed only the sets of
//! the classes listed for it, so a name's port limit holds after it is
//! resolved. Each set must be
//! created with **`flags timeout` and a default `timeout` equal to
//! [`DnsTiming::set_timeout`]** (600 s by default): dnsmasq 2.90 runs
//! `add element inet corral <set> { <addr> }` with no timeout of its own, so
//! the set default is the only timeout an element gets. The plan sets it to
//! `plan::DNS_SET_TIMEOUT`, which equals `DnsTiming::default().set_timeout`:
//! production uses the default timing on both sides (tests shorten both,
//! editing the plan's dynamic sets). `tests/gateway_set_timeout.rs` proves
//! the gateway side against a hand-made set; `tests/gateway_netns.rs` the
//! whole chain with the plan's sets.
//!
//! # The TTL rule (measured on dnsmasq 2.90, kernel 6.18)
//!
//! - dnsmasq adds an answer to the set only when it forwards the query, never
//!   on a cache hit, so the filtered resolver runs with `cache-size=0`: every
//!   sandbox query is forwarded and every answer passes the nftset hook.
//! - The TTL handed to sandboxes is capped at [`DnsTiming::client_ttl_cap`]
//!   (`max-ttl`, 60 s by default), so a client caches an answer at most that long.
//! - The kernel does not extend an existing element when the same address is
//!   added again without an explicit timeout: the element lives
//!   `set_timeout` from the answer that *created* it. So an answer handed out
//!   in the first `set_timeout - client_ttl_cap` seconds of an element's life
//!   is covered for its whole TTL; one handed out later may outlive the
//!   element by up to `client_ttl_cap`, and new connections in that window
//!   are refused until the client re-resolves (fail closed), which re-adds
//!   the address. [`DnsTiming::validate`] enforces
//!   `set_timeout >= client_ttl_cap`.
//!
//! Answers with private addresses are dropped (`stop-dns-rebind`), so an
//! allowlisted name can never put a LAN address into the allow set.

#![warn(missing_docs)]

pub mod advert;
pub mod advertiser;
pub mod approvals;
pub mod dhcp;
mod error;
mod exit_watch;
mod files;
mod fleet;
mod hosted_gateway;
mod hosted_mark;
pub mod leases;
mod lifecycle;
mod names;
mod on_port;
mod orphans;
mod paths;
mod ports;
pub mod probe;
mod process;
mod render;
mod reservations;
mod resolv_conf;
pub mod resolver;
mod spec;
mod started;
pub mod test_upstream;
pub mod wire;

pub use error::GatewayError;
pub use exit_watch::ExitWatch;
pub use fleet::{Started, start_all, status_all, stop_all, upstreams};
pub use hosted_gateway::HostedGateway;
pub use hosted_mark::is_hosted;
pub use leases::{Lease, leases};
pub use lifecycle::{GatewayReport, GatewayState, start_for_host, status_recorded, stop_recorded};
pub use names::{DomainRule, LearnSets, NamePattern, NameRules, SetLine};
pub use orphans::{FoundGateway, find_gateways, stop_gateways};
pub use paths::GatewayPaths;
pub use ports::{PortError, bind_port, unbind_port};
pub use process::{Change, DEFAULT_DNSMASQ, Gateway, GatewayStatus};
pub use render::{DNS_FORWARD_MAX, MAX_TCP_CONNECTIONS, NFT_TABLE, render};
pub use reservations::{ReservationOutcome, reservations_text, reserve_all};
pub use resolv_conf::{RESOLV_CONF, nameservers, upstreams_or_host};
pub use spec::{DEFAULT_LEASE_TIME, DnsService, DnsTiming, GatewaySpec, serves_dns};
