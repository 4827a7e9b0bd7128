//! nftables over netlink (libnftnl + libmnl): apply a [`HostPlan`] as one
//! transaction, read corral's tables back, delete them, refresh set
//! elements in place.
//!
//! Every function acts on the **current thread's** network namespace (run
//! it on a thread that entered another namespace to act there). No `nft`
//! binary is involved.
//!
//! Public API:
//! - [`apply`]`(&plan) -> BatchStats`: one batch — `add table; delete
//!   table` for both corral tables, then both tables with sets, elements,
//!   chains and rules — sent in ONE `sendmsg` after raising the socket
//!   buffers. Any error aborts the whole transaction in the kernel; the
//!   previous ruleset stays. Applying the same plan twice leaves an
//!   identical ruleset (read-back diff empty both times).
//! - [`delete_tables`]`()`: remove `inet corral` and `bridge corral` (if
//!   present) in one transaction; other tables are never touched.
//! - [`refresh_sets`]`(&old, &new) -> RefreshReport`: element-only update
//!   (delete removed ranges, add new ones) in one transaction; refused with
//!   [`NftError::NotRefreshable`] if the plans differ in anything else.
//! - [`read_live`]`() -> LiveState`: chains, rules (comparable text, handle,
//!   counters, verdict class), sets and elements of corral's tables.
//!   Compare with `drift::diff(&plan, &live)`.
//! - [`profile_counters`]`(&plan, &live)`: accepted/blocked packets and
//!   bytes per profile (`corral host status`).
//! - [`fingerprint`]: the comparable text of a planned rule.
//! - [`apply_with_fault`]: [`apply`] plus a deliberate error, for fault tests.
//!
//! Module map: `obj` (owned libnftnl objects), `limits` (the lengths
//! libnftnl accepts), `expr` (plan matches → expressions, rule text),
//! `set` (interval elements on the wire), `wire` (each message's length
//! bounded before it is written), `batch` (one contiguous transaction),
//! `socket` (send/ack/dump), `apply`, `readback`, `live_trace` (the live
//! ruleset run for one packet), `counters`, `udata` (how `nft` is told to
//! show a set's keys), `watch` (the kernel's notifications of changes to
//! corral's tables).

mod apply;
mod batch;
mod concat;
mod counters;
mod decode;
mod expr;
mod learn;
mod limits;
pub mod live_trace;
mod obj;
mod readback;
mod set;
mod socket;
mod udata;
mod watch;
mod wire;

pub use apply::{
    BatchStats, Fault, Learned, RefreshReport, apply, apply_keeping, apply_with_fault,
    delete_table, delete_tables, learned, refresh_sets, update_keyed,
};
pub use counters::{ProfileCounters, profile_counters};
pub use decode::nft_syntax;
pub use expr::fingerprint;
pub use learn::{LearnElement, learn};
pub use readback::{
    LiveBase, LiveChain, LiveRule, LiveSet, LiveState, LiveTable, read_learned, read_live,
    read_live_enforcing, read_set,
};
pub use set::{keyed_flags, map_flags, map_wire_elements};
pub use udata::set_userdata;
pub use watch::{NftChange, NftEvent, NftObject, NftWatch};

#[cfg(doc)]
use crate::plan::HostPlan;

/// An nftables operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// The netfilter netlink socket could not be opened, configured or used.
    #[error(
        "netfilter netlink socket failed: {0}; corral needs root (CAP_NET_ADMIN) and a kernel with nf_tables"
    )]
    Socket(#[source] std::io::Error),
    /// The kernel refused the transaction; nothing was changed.
    #[error(
        "the kernel rejected the nftables transaction while {what}; nothing was changed and the previous ruleset stays in force"
    )]
    Rejected {
        /// Which message failed (e.g. "adding rule 3 of chain inet dev-out").
        what: String,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
    },
    /// Reading objects back failed.
    #[error("reading nftables {what} back failed")]
    Dump {
        /// What was being read.
        what: String,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
    },
    /// A kernel answer could not be parsed.
    #[error(
        "could not parse a netlink {0} message; libnftnl and the kernel disagree (check the libnftnl version)"
    )]
    Parse(&'static str),
    /// libnftnl could not allocate an object.
    #[error("libnftnl could not allocate {0} (out of memory)")]
    Alloc(&'static str),
    /// A name cannot be used in nftables.
    #[error(
        "name `{0}` cannot be used in nftables (interface names are at most 15 bytes, no NUL bytes anywhere)"
    )]
    BadName(String),
    /// A refresh was asked for plans that differ beyond set elements.
    #[error("cannot refresh set elements in place: {0}; apply the new plan instead")]
    NotRefreshable(String),
    /// A keyed set's key is too long to describe to `nft` (user data
    /// records hold at most 255 bytes).
    #[error(
        "set {set}: describing its key to nft needs {len} bytes in one record, more than the 255 nftables allows; key the set by fewer fields"
    )]
    SetKeyDescription {
        /// The set.
        set: String,
        /// Bytes the record would need.
        len: usize,
    },
    /// A netlink message would not fit the buffer room libnftnl writes it
    /// into; the batch was not sent.
    #[error(
        "the netlink message for {what} needs {len} bytes, more than the {room} a message may take; nothing was sent and the previous ruleset stays in force (split the change into smaller sets)"
    )]
    MessageTooLarge {
        /// What the message does.
        what: String,
        /// Its length, or an upper bound of it.
        len: usize,
        /// The room it had.
        room: usize,
    },
    /// Bytes handed to libnftnl break its length contract (a set element's
    /// key longer than the set's key, an expression's data longer than a
    /// register).
    #[error(
        "{what} is {len} bytes, expected {expected}; this is a bug in corral's plan encoding, nothing was sent"
    )]
    DataLength {
        /// Which value (e.g. "the key of an element of set allow4").
        what: String,
        /// Its length.
        len: usize,
        /// The length the contract asks for ("4", "at most 64").
        expected: String,
    },
    /// The kernel did not answer within the socket's timeout.
    #[error(
        "no answer from the kernel within {secs} s while {what}; the netlink socket may be starved or the kernel stuck (for a transaction, run `corral host verify` to see what is in force)"
    )]
    Timeout {
        /// What was being read.
        what: String,
        /// The timeout in seconds.
        secs: u64,
    },
}

impl NftError {
    /// True when the kernel refused a transaction because a set was at
    /// its size (`ENFILE`): a learned set that is full, which refuses new
    /// addresses and keeps the ones it has.
    pub fn is_set_full(&self) -> bool {
        matches!(self, NftError::Rejected { source, .. } if source.raw_os_error() == Some(libc::ENFILE))
    }

    /// The set a refused element add was for (`nft::learn` notes its
    /// messages "learning N addresses into set S").
    pub fn set_named(&self) -> Option<String> {
        match self {
            NftError::Rejected { what, .. } => {
                what.split_once(" into set ").map(|(_, set)| set.to_owned())
            }
            _ => None,
        }
    }
}
