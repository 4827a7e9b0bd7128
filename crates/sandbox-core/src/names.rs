//! Validated names: every string that reaches a kernel, a daemon or an argv
//! passes through one of these newtypes first, so downstream code never
//! re-checks (and never forgets to check) a name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a name was refused. The message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("{what} is empty; expected {expected}")]
    Empty {
        /// Which kind of name.
        what: &'static str,
        /// What a valid one looks like.
        expected: &'static str,
    },
    /// The name is longer than allowed.
    #[error(
        "{what} `{}` is {len} bytes long; the limit is {max} bytes",
        crate::text::Shown(value)
    )]
    TooLong {
        /// Which kind of name.
        what: &'static str,
        /// The refused value.
        value: String,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The name holds a character outside the allowed set, or is shaped wrong.
    #[error(
        "{what} `{}` is invalid: {}; expected {expected}",
        crate::text::Shown(value),
        crate::text::Shown(reason)
    )]
    Invalid {
        /// Which kind of name.
        what: &'static str,
        /// The refused value.
        value: String,
        /// What is wrong with it.
        reason: String,
        /// What a valid one looks like.
        expected: &'static str,
    },
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validate and wrap `value`.
            pub fn new(value: impl Into<String>) -> Result<Self, NameError> {
                let value = value.into();
                $check(&value)?;
                Ok(Self(value))
            }

            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::new(value)
            }
        }

        impl std::str::FromStr for $name {
            type Err = NameError;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// Linux caps interface names at IFNAMSIZ - 1 bytes.
pub const MAX_BRIDGE_NAME_LEN: usize = 15;

const BRIDGE_EXPECTED: &str = "1 to 15 bytes of [A-Za-z0-9_.-], not `.` or `..`";

fn check_bridge(value: &str) -> Result<(), NameError> {
    check_ifname("bridge name", value)
}

fn check_interface(value: &str) -> Result<(), NameError> {
    check_ifname("interface name", value)
}

/// Shared shape of bridge and other interface names (IFNAMSIZ, safe charset).
fn check_ifname(what: &'static str, value: &str) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty {
            what,
            expected: BRIDGE_EXPECTED,
        });
    }
    if value.len() > MAX_BRIDGE_NAME_LEN {
        return Err(NameError::TooLong {
            what,
            value: value.to_owned(),
            len: value.len(),
            max: MAX_BRIDGE_NAME_LEN,
        });
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(NameError::Invalid {
            what,
            value: value.to_owned(),
            reason: format!("character {bad:?} is not allowed"),
            expected: BRIDGE_EXPECTED,
        });
    }
    if value == "." || value == ".." {
        return Err(NameError::Invalid {
            what,
            value: value.to_owned(),
            reason: "it names a directory entry".to_owned(),
            expected: BRIDGE_EXPECTED,
        });
    }
    Ok(())
}

string_newtype!(
    /// A Linux bridge interface name: 1–15 bytes of `[A-Za-z0-9_.-]`.
    BridgeName,
    check_bridge
);

string_newtype!(
    /// Any other Linux interface name (the host uplink, for example), with the
    /// same rules as a bridge name: 1–15 bytes of `[A-Za-z0-9_.-]`.
    InterfaceName,
    check_interface
);

const LABEL_EXPECTED: &str =
    "1 to 63 characters of [a-z0-9-], starting with a letter, not ending with `-`";

/// Shared shape of profile and sandbox names: a lower-case DNS label, which is
/// also safe in nftables identifiers, Incus instance names and argv.
fn check_label(what: &'static str, value: &str) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty {
            what,
            expected: LABEL_EXPECTED,
        });
    }
    if value.len() > 63 {
        return Err(NameError::TooLong {
            what,
            value: value.to_owned(),
            len: value.len(),
            max: 63,
        });
    }
    let invalid = |reason: String| NameError::Invalid {
        what,
        value: value.to_owned(),
        reason,
        expected: LABEL_EXPECTED,
    };
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(invalid(format!("character {bad:?} is not allowed")));
    }
    if !value.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(invalid("it must start with a letter".to_owned()));
    }
    if value.ends_with('-') {
        return Err(invalid("it must not end with `-`".to_owned()));
    }
    Ok(())
}

fn check_profile(value: &str) -> Result<(), NameError> {
    check_label("profile name", value)
}

fn check_sandbox(value: &str) -> Result<(), NameError> {
    check_label("sandbox name", value)
}

string_newtype!(
    /// A profile name: a lower-case DNS label (`[a-z][a-z0-9-]{0,62}`).
    ProfileName,
    check_profile
);

string_newtype!(
    /// A sandbox name: a lower-case DNS label, valid as an Incus instance,
    /// Multipass or Tart VM name and harmless in any argv or shell.
    SandboxName,
    check_sandbox
);

const HOST_EXPECTED: &str = "a DNS name of dot-separated labels of [A-Za-z0-9-] (1 to 63 each, no \
    leading or trailing `-`), at most 253 characters";

fn check_host(value: &str) -> Result<(), NameError> {
    const WHAT: &str = "host name";
    let trimmed = value.strip_suffix('.').unwrap_or(value);
    if trimmed.is_empty() {
        return Err(NameError::Empty {
            what: WHAT,
            expected: HOST_EXPECTED,
        });
    }
    if trimmed.len() > 253 {
        return Err(NameError::TooLong {
            what: WHAT,
            value: value.to_owned(),
            len: trimmed.len(),
            max: 253,
        });
    }
    let invalid = |reason: String| NameError::Invalid {
        what: WHAT,
        value: value.to_owned(),
        reason,
        expected: HOST_EXPECTED,
    };
    for label in trimmed.split('.') {
        if label.is_empty() {
            return Err(invalid("it has an empty label".to_owned()));
        }
        if label.len() > 63 {
            return Err(invalid(format!("label `{label}` is longer than 63")));
        }
        if let Some(bad) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Err(invalid(format!("character {bad:?} is not allowed")));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid(format!("label `{label}` starts or ends with `-`")));
        }
    }
    if trimmed
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(invalid(
            "its last label is all digits (an address belongs in a CIDR entry)".to_owned(),
        ));
    }
    Ok(())
}

string_newtype!(
    /// A DNS host name (RFC 1123), stored as written minus any trailing dot.
    HostName,
    check_host
);

impl HostName {
    /// The name in lower case, as DNS compares it.
    pub fn normalized(&self) -> String {
        self.0.trim_end_matches('.').to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_names() {
        assert!(BridgeName::new("cb-iso").is_ok());
        assert!(BridgeName::new("a.b_c-1").is_ok());
        let err = BridgeName::new("corral-way-too-long").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bridge name `corral-way-too-long` is 19 bytes long; the limit is 15 bytes"
        );
        assert!(BridgeName::new("br 0").is_err());
        assert!(BridgeName::new("..").is_err());
        assert!(BridgeName::new("").is_err());
    }

    #[test]
    fn labels() {
        assert!(SandboxName::new("agent-1").is_ok());
        assert!(SandboxName::new("1agent").is_err());
        assert!(SandboxName::new("Agent").is_err());
        assert!(SandboxName::new("a;rm -rf").is_err());
        assert!(ProfileName::new("x-").is_err());
    }

    #[test]
    fn host_names() {
        assert!(HostName::new("api.example.com").is_ok());
        assert!(HostName::new("example.com.").is_ok());
        assert!(HostName::new("exa mple.com").is_err());
        assert!(HostName::new("-x.com").is_err());
        assert!(HostName::new("1.2.3.4").is_err());
        let parent = HostName::new("example.com").unwrap();
        assert!(parent.covers(&HostName::new("A.Example.com").unwrap()));
        assert!(!parent.covers(&HostName::new("badexample.com").unwrap()));
    }
}
