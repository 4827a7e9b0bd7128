//! Incus cluster members as corral trusts them: a member's attestation
//! (what its corral proves about its own enforcement) and the rotation
//! (which members may take profiled work, which are drained and why).
//!
//! Incus decides membership and reports a member online, evacuated or
//! offline; corral adds that a member takes profiled work only while its
//! last attestation passed and is younger than the attestation interval.
//! An attestation that fails, or none in time, drains the member; a
//! passing one puts it back. This module is the decision; carrying an
//! attestation between corrald instances (mutually authenticated TLS) is
//! not built yet (docs/cluster.md), so today the attestation is taken by
//! the corral that applied the member's enforcement, in its namespace.

mod attestation;
mod rotation;
pub mod settings;

pub use attestation::{Attestation, Attester, attest};
pub use rotation::{Change, Rotation, Standing};
pub use settings::{ClusterSettings, Peer};
