//! `corral-sandbox-core`: what *should be*, as pure data.
//!
//! Profiles and their validation, the host-platform × sandbox-kind matrix,
//! the egress trust order, the `SandboxProvider` trait, the per-sandbox
//! verification gate and placement. Nothing in this crate performs I/O:
//! callers read files, talk to kernels and daemons, and pass time in.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod names;
pub mod platform;
pub mod profile;
pub mod sandbox;

pub use names::{BridgeName, HostName, NameError, ProfileName, SandboxName};
pub use platform::{HostOs, SandboxKind};
pub use profile::{
    AllowEntry, AllowTarget, BlockAction, DnsPolicy, EgressMode, PortRange, Profile, ProfileSet,
    Protocol,
};
