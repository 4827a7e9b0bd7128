//! `corral-egress`: make the host *be* what the profiles say, over netlink,
//! and read it back to prove it.
//!
//! Layout: `plan` (pure desired state and its nft rendering), `nft`
//! (nftables batches, sets, read-back), `drift` (plan vs live), `resolve`
//! (names → addresses), `link` (bridges, addresses, port isolation),
//! `sysctl`, `host` (the apply/verify/status/teardown/refresh facade),
//! `gateway` (DHCP + filtered DNS), `netns` (anonymous namespaces, the test
//! topology, probes) and `drill` (the isolation drill).
#![warn(missing_docs)]

pub mod drift;
pub mod drill;
pub mod gateway;
pub mod host;
pub mod link;
pub mod netns;
pub mod nft;
pub mod plan;
pub mod resolve;
pub mod sysctl;
