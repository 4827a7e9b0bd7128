//! corral's end-to-end test support: the provider conformance scenario
//! ([`conformance`]), recording fakes of the `multipass` and `tart` tools
//! ([`fakes`]), and a corral profile bridge in the host namespace for real
//! Incus containers ([`hostlab`]), and the three built-in profiles applied
//! for real with a canary destination behind them ([`builtin_lab`]). The suites themselves are in `tests/`.
#![warn(missing_docs)]

pub mod builtin_lab;
pub mod conformance;
pub mod fakes;
pub mod hostlab;
pub mod incus;
