//! `corral-egress`: make the host *be* what the profiles say, over netlink,
//! and read it back to prove it.
//!
//! Layout: `plan` (pure desired state and its nft rendering), `nft`
//! (nftables batches, sets, read-back), `drift` (plan vs live), `resolve`
//! (names → addresses), `link` (bridges, addresses, port isolation),
//! `sysctl`, `netns` (acting inside another network namespace) and `host`
//! (the apply/verify/status/teardown/refresh facade).
//!
//! The gateway services (DHCP and filtered DNS) live in `corral-gateway`,
//! the namespace lab and the isolation drill in `corral-drill`.
#![warn(missing_docs)]

pub mod conntrack;
pub mod drift;
pub mod droplog;
pub mod host;
pub mod hostnet;
pub mod link;
pub mod netns;
pub mod nft;
pub mod own_targets;
pub mod plan;
pub mod resolve;
pub mod sysctl;
