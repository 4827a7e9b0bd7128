//! A sandbox's query: refused at once, or rebuilt for the upstream.

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};

use super::ede::{EDE_BLOCKED, EDE_NOT_SUPPORTED, ExtendedError, edns_with};
use super::{Decision, EDNS_PAYLOAD, Policy};

/// `name` as the allowlist compares it: lower case, no final dot.
pub(super) fn text(name: &Name) -> String {
    let s = name.to_lowercase().to_ascii();
    s.strip_suffix('.').unwrap_or(&s).to_owned()
}

/// The response to `query` with `code` and `answers`, carrying `errors`
/// when the client sent EDNS: its id, opcode, question and recursion
/// bit; recursion available; never authoritative.
pub(super) fn respond(
    query: &Message,
    code: ResponseCode,
    answers: Vec<hickory_proto::rr::Record>,
    errors: &[ExtendedError],
) -> Message {
    let mut m = Message::new();
    m.set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .set_response_code(code);
    for q in query.queries() {
        m.add_query(q.clone());
    }
    m.insert_answers(answers);
    if query.extensions().is_some() {
        m.set_edns(edns_with(errors));
    }
    m
}

impl Policy {
    /// The name of `query` when it is a well-formed A or AAAA question, of
    /// class IN, for a name this policy does not admit: a lookup that may
    /// be held for the operator rather than refused.
    pub fn unlisted(&self, query: &Message) -> Option<String> {
        let q = query.queries().first()?;
        let plain = query.message_type() == MessageType::Query
            && query.op_code() == OpCode::Query
            && query.queries().len() == 1
            && query.answers().is_empty()
            && query.name_servers().is_empty()
            && query.additionals().is_empty()
            && q.query_class() == DNSClass::IN
            && matches!(q.query_type(), RecordType::A | RecordType::AAAA);
        let name = text(q.name());
        (plain && !self.names.admits(&name)).then_some(name)
    }

    /// This policy, admitting `name` besides (a name the operator
    /// approved for one lookup).
    pub fn admitting(&self, name: &str) -> Policy {
        Policy {
            names: self.names.with_exact(name),
            ..self.clone()
        }
    }

    fn blocked(&self, name: &str) -> ExtendedError {
        ExtendedError::new(
            EDE_BLOCKED,
            format!(
                "blocked by corral profile `{}`: `{name}` is not on its allowlist; ask the operator to allow `{name}`",
                self.profile
            ),
        )
    }

    /// What to do with `query` from a sandbox; `upstream_id` is the id the
    /// rebuilt query gets (the server's to choose, at random, and to match
    /// the answer on).
    pub fn decide(&self, query: &Message, upstream_id: u16) -> Decision {
        if query.message_type() != MessageType::Query {
            return Decision::Ignore;
        }
        let refuse = |code, errors: &[ExtendedError]| {
            Decision::Answer(respond(query, code, Vec::new(), errors))
        };
        if query.op_code() != OpCode::Query {
            return refuse(
                ResponseCode::NotImp,
                &[ExtendedError::new(
                    EDE_NOT_SUPPORTED,
                    "corral's gateway answers standard queries only",
                )],
            );
        }
        let one_question = query.queries().len() == 1
            && query.answers().is_empty()
            && query.name_servers().is_empty()
            && query.additionals().is_empty();
        let Some(q) = query.queries().first().filter(|_| one_question) else {
            return refuse(
                ResponseCode::FormErr,
                &[ExtendedError::new(
                    EDE_NOT_SUPPORTED,
                    "a query carries one question and no records",
                )],
            );
        };
        let name = text(q.name());
        if q.query_class() != DNSClass::IN {
            return refuse(
                ResponseCode::Refused,
                &[ExtendedError::new(
                    EDE_NOT_SUPPORTED,
                    "corral's gateway answers class IN only",
                )],
            );
        }
        if !self.names.admits(&name) {
            return refuse(ResponseCode::NXDomain, &[self.blocked(&name)]);
        }
        let qtype = q.query_type();
        if !matches!(qtype, RecordType::A | RecordType::AAAA) {
            // The name exists for the sandbox, the type does not: NODATA.
            return refuse(
                ResponseCode::NoError,
                &[ExtendedError::new(
                    EDE_NOT_SUPPORTED,
                    format!(
                        "corral profile `{}` answers A and AAAA queries only",
                        self.profile
                    ),
                )],
            );
        }
        let mut up = Message::new();
        up.set_id(upstream_id)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(true);
        let mut lower = Query::query(q.name().to_lowercase(), qtype);
        lower.set_query_class(DNSClass::IN);
        up.add_query(lower);
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        up.set_edns(edns);
        Decision::Forward(up)
    }
}
