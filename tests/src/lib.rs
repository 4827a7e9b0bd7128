//! corral's end-to-end test support: the provider conformance scenario
//! ([`conformance`]), recording fakes of the `multipass` and `tart` tools
//! ([`fakes`]), and a corral profile bridge in the host namespace for real
//! Incus containers ([`hostlab`]). The suites themselves are in `tests/`.
#![warn(missing_docs)]

pub mod conformance;
pub mod fakes;
pub mod hostlab;
pub mod incus;
