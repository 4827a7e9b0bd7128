//! Incus cluster members as corral trusts them: a member's attestation
//! (what its corral proves about its own enforcement) and the rotation
//! (which members may take profiled work, which are drained and why).
//!
//! Incus decides membership and reports a member online, evacuated or
//! offline; corral adds that a member takes profiled work only while its
//! last attestation passed and is younger than the attestation interval.
//! An attestation that fails, or none in time, drains the member; a
//! passing one puts it back. This module is the decision and the
//! transport: a member's corrald serves its attestation
//! (`corral.attestation.v1`, [`AttestationDoc`]) over mutually
//! authenticated TLS ([`tls`]), and [`RemoteAttester`] asks for it; the
//! in-process [`attest`] takes and judges one the same way.

mod attestation;
pub mod controller;
pub mod drain;
pub mod persisted;
pub mod placement;
pub mod remote;
mod rotation;
pub mod settings;
pub mod tls;

pub use attestation::{Attestation, AttestationDoc, Attester, SCHEMA, attest, config_sha256};
pub use controller::{Controller, MemberList, Tick, TickError};
pub use drain::{MemberCanary, OnDrain, Reverified, Reverifier, reverify};
pub use persisted::RotationFile;
pub use placement::{PlacementRefused, place};
pub use remote::{Admit, RemoteAttester};
pub use rotation::{Change, Rotation, Standing};
pub use settings::{ClusterSettings, Peer};
