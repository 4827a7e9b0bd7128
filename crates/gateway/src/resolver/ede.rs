//! Extended DNS Errors (RFC 8914): an EDNS option carrying an info code
//! and a UTF-8 text, which is where a refusal says why and what to do.

use hickory_proto::op::{Edns, Message};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};

/// EDNS option code of an Extended DNS Error.
const OPTION: u16 = 15;

/// Info code 0, "Other": the text says it all (here: addresses cut).
pub const EDE_OTHER: u16 = 0;
/// Info code 15, "Blocked": the operator's policy refuses the name.
pub const EDE_BLOCKED: u16 = 15;
/// Info code 21, "Not Supported": a query of a kind corral does not answer.
pub const EDE_NOT_SUPPORTED: u16 = 21;

/// One Extended DNS Error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedError {
    /// The info code.
    pub code: u16,
    /// The text for people (and agents).
    pub text: String,
}

impl ExtendedError {
    /// The error `code` with `text`.
    pub fn new(code: u16, text: impl Into<String>) -> Self {
        Self {
            code,
            text: text.into(),
        }
    }

    fn option(&self) -> EdnsOption {
        let mut data = self.code.to_be_bytes().to_vec();
        data.extend_from_slice(self.text.as_bytes());
        EdnsOption::Unknown(OPTION, data)
    }
}

/// Corral's own EDNS record for a response: its payload size and `errors`.
pub(super) fn edns_with(errors: &[ExtendedError]) -> Edns {
    let mut edns = Edns::new();
    edns.set_max_payload(super::EDNS_PAYLOAD);
    for e in errors {
        edns.options_mut().insert(e.option());
    }
    edns
}

/// The Extended DNS Errors `message` carries.
pub fn extended_errors(message: &Message) -> Vec<ExtendedError> {
    let Some(edns) = message.extensions() else {
        return Vec::new();
    };
    edns.options()
        .get_all(EdnsCode::from(OPTION))
        .into_iter()
        .filter_map(|o| match o {
            EdnsOption::Unknown(OPTION, data) if data.len() >= 2 => Some(ExtendedError {
                code: u16::from_be_bytes([data[0], data[1]]),
                text: String::from_utf8_lossy(&data[2..]).into_owned(),
            }),
            _ => None,
        })
        .collect()
}
