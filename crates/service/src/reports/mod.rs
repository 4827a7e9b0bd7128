//! What the CLI's `--json` and corrald's answers print for the same
//! objects — profiles, the host plan, verify and status — built once here
//! so both front-ends give the same shape and the same words (`source`:
//! where the configuration came from; `basis`: whether the plan compared
//! is what was last applied or the configuration). Schemas:
//! docs/json-schema.md.

mod cluster;
mod drift;
mod host;
mod profiles;

pub use cluster::{ClusterReport, ControllerView, MemberView, cluster_report};
pub use drift::{DriftView, drift_views};
pub use host::{PlanReport, StatusReport, VerifyReport, basis, wiring_for};
pub use profiles::{ProfileView, ProfilesReport};
