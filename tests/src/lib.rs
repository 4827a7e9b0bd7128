//! corral's end-to-end test support: the provider conformance scenario
//! ([`conformance`]), recording fakes of the `multipass` and `tart` tools
//! ([`fakes`]), and a corral profile bridge in the host namespace for real
//! Incus containers ([`hostlab`]), and the three built-in profiles applied
//! for real with a canary destination behind them ([`builtin_lab`]), and a
//! real two-member Incus cluster in network namespaces ([`cluster`]). The suites themselves are in `tests/`.
#![warn(missing_docs)]

pub mod builtin_lab;
pub mod cluster;
pub mod conformance;
pub mod fakes;
pub mod hostlab;
pub mod incus;
