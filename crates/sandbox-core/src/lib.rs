//! `corral-sandbox-core`: what *should be*, as pure data.
//!
//! Profiles and their validation, the configuration file formats, the
//! host-platform × sandbox-kind matrix, the egress trust order, the
//! `SandboxProvider` trait, the per-sandbox verification gate and placement.
//! Nothing in this crate performs I/O: callers read files, talk to kernels
//! and daemons, and pass time in.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod audit;
pub mod config;
pub mod mac;
pub mod names;
pub mod placement;
pub mod platform;
pub mod profile;
pub mod reserved;
pub mod sandbox;
pub mod text;
pub mod verify;

pub use config::{
    Config, ConfigError, ConfigErrors, HostConfig, Phase, PhaseProfiles, WatchConfig, WatchReaction,
};
pub use mac::{MacAddr, MacParseError};
pub use names::{BridgeName, HostName, InterfaceName, NameError, ProfileName, SandboxName};
pub use platform::{Enforcement, EnforcementSite, HostOs, Isolation, SandboxKind, select_provider};
pub use profile::{
    AllowEntry, AllowTarget, Approvals, BlockAction, DnsPolicy, EgressMode, FlowLimits, PortRange,
    PortRangeError, Profile, ProfileSet, Protocol,
};
