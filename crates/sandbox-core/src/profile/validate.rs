//! Profile-set validation. (Foundation: the full rule set lands with the
//! config work; this file is where it lives.)

use super::{Profile, ProfileSet};

/// Profile-set validation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValidationError(pub String);

impl ProfileSet {
    /// Validate `profiles` as a whole; nothing is returned unless all pass.
    pub fn new(profiles: Vec<Profile>) -> Result<Self, ValidationError> {
        for (i, a) in profiles.iter().enumerate() {
            for b in &profiles[..i] {
                if a.name == b.name {
                    return Err(ValidationError(format!("duplicate profile `{}`", a.name)));
                }
                if a.bridge == b.bridge {
                    return Err(ValidationError(format!("duplicate bridge `{}`", a.bridge)));
                }
            }
        }
        Ok(Self::from_validated(profiles))
    }
}
