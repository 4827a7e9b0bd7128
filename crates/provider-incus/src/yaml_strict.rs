//! The YAML features that make one text mean two things, refused.
//!
//! corral checks a backup's records with one YAML parser and Incus reads
//! them with another (Go's). Where the two could disagree about what a
//! record says, the check would hold the wrong reading to the allowlist: a
//! merge key (`<<: {raw.lxc: …}`) is a plain `<<` entry to `yaml_serde` and
//! a set of settings to Go; an alias repeats a subtree the checker may see
//! once; an explicit tag (`!!merge`, `!!binary`) changes a node's type.
//! Incus writes none of these, so a record holding one is refused. The
//! check walks libyaml's event stream, where anchors, aliases and tags are
//! still visible (a parsed value has resolved them).

#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use libyaml_rs as sys;

/// What makes a record ambiguous, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indirection {
    /// The line of the node.
    pub line: u64,
    /// What was found.
    pub what: &'static str,
}

impl std::fmt::Display for Indirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

/// The parser, freed on every path out.
struct Parser(Box<MaybeUninit<sys::yaml_parser_t>>);

impl Drop for Parser {
    fn drop(&mut self) {
        // SAFETY: the parser was initialised by `yaml_parser_initialize`
        // (a `Parser` is only built after that succeeded) and is deleted
        // once, here.
        unsafe { sys::yaml_parser_delete(self.0.as_mut_ptr()) }
    }
}

/// The first anchor, alias, merge key or explicit tag in `text`; `Err` when
/// libyaml cannot parse it at all (the caller parses it first, for a better
/// message).
pub fn first_indirection(text: &str) -> Result<Option<Indirection>, String> {
    let mut raw: Box<MaybeUninit<sys::yaml_parser_t>> = Box::new(MaybeUninit::uninit());
    // SAFETY: `raw` is a live allocation of the parser's size and alignment;
    // initialisation writes every field it later reads.
    if unsafe { sys::yaml_parser_initialize(raw.as_mut_ptr()) }.fail {
        return Err("the YAML parser could not be set up (out of memory)".to_owned());
    }
    let mut parser = Parser(raw);
    let p = parser.0.as_mut_ptr();
    // SAFETY: `p` is an initialised parser; `text` outlives it (the parser
    // is dropped at the end of this function, before `text` can be).
    unsafe {
        sys::yaml_parser_set_encoding(p, sys::YAML_UTF8_ENCODING);
        sys::yaml_parser_set_input_string(p, text.as_ptr(), text.len() as u64);
    }
    loop {
        let mut event = MaybeUninit::<sys::yaml_event_t>::uninit();
        // SAFETY: `p` is an initialised parser with input set; `event` is
        // writable storage for one event, which a success fills in.
        if unsafe { sys::yaml_parser_parse(p, event.as_mut_ptr()) }.fail {
            return Err("it is not valid YAML".to_owned());
        }
        // SAFETY: a successful parse initialised the event.
        let found = unsafe { classify(&*event.as_ptr()) };
        // SAFETY: the event was initialised above and is deleted once.
        unsafe { sys::yaml_event_delete(event.as_mut_ptr()) };
        match found {
            Step::End => return Ok(None),
            Step::Found(what, line) => return Ok(Some(Indirection { line, what })),
            Step::Next => {}
        }
    }
}

enum Step {
    Next,
    End,
    Found(&'static str, u64),
}

/// # Safety
/// `event` must be an event libyaml filled in: its union member is the one
/// its type names, and its pointers are null or valid C strings/bytes.
unsafe fn classify(event: &sys::yaml_event_t) -> Step {
    let line = event.start_mark.line + 1;
    let (anchor, tag) = match event.type_ {
        sys::YAML_STREAM_END_EVENT => return Step::End,
        sys::YAML_ALIAS_EVENT => return Step::Found("an alias (*name)", line),
        sys::YAML_SCALAR_EVENT => {
            // SAFETY: a scalar event's data is its `scalar` member.
            let s = unsafe { event.data.scalar };
            // SAFETY: libyaml's scalar value is `length` readable bytes.
            let value = unsafe { std::slice::from_raw_parts(s.value, s.length as usize) };
            if s.style == sys::YAML_PLAIN_SCALAR_STYLE && value == b"<<" {
                return Step::Found("a merge key (<<)", line);
            }
            (s.anchor, s.tag)
        }
        sys::YAML_SEQUENCE_START_EVENT => {
            // SAFETY: a sequence-start event's data is `sequence_start`.
            let s = unsafe { event.data.sequence_start };
            (s.anchor, s.tag)
        }
        sys::YAML_MAPPING_START_EVENT => {
            // SAFETY: a mapping-start event's data is `mapping_start`.
            let m = unsafe { event.data.mapping_start };
            (m.anchor, m.tag)
        }
        _ => return Step::Next,
    };
    if !anchor.is_null() {
        return Step::Found("an anchor (&name)", line);
    }
    if !tag.is_null() {
        return Step::Found("an explicit tag (!name)", line);
    }
    Step::Next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what(text: &str) -> Option<&'static str> {
        first_indirection(text).unwrap().map(|i| i.what)
    }

    #[test]
    fn plain_records_pass() {
        assert_eq!(
            what("a: b\nc: [1, 2]\nd: {e: f}\ng: '<<'\nh: \"*x\"\n"),
            None
        );
        assert_eq!(what(""), None);
    }

    #[test]
    fn every_indirection_is_found_with_its_line() {
        assert_eq!(what("a: &x {b: c}\n"), Some("an anchor (&name)"));
        assert_eq!(what("a: &x b\nc: *x\n"), Some("an anchor (&name)"));
        // Events are not resolved: an alias is seen even without its anchor.
        assert_eq!(what("a: b\nc: *x\n"), Some("an alias (*name)"));
        assert_eq!(
            what("config:\n  <<: {raw.lxc: x}\n"),
            Some("a merge key (<<)")
        );
        assert_eq!(
            first_indirection("a: b\nconfig:\n  <<: {raw.lxc: x}\n").unwrap(),
            Some(Indirection {
                line: 3,
                what: "a merge key (<<)"
            })
        );
        assert_eq!(what("a: !!merge b\n"), Some("an explicit tag (!name)"));
        assert_eq!(what("a: !!binary aGk=\n"), Some("an explicit tag (!name)"));
        assert_eq!(what("- !x [1]\n"), Some("an explicit tag (!name)"));
    }

    #[test]
    fn yaml_serde_alone_reads_a_merge_key_as_a_plain_entry() {
        // The control: the value the old check walked has no `raw.lxc` key.
        let v: yaml_serde::Value = yaml_serde::from_str("config:\n  <<: {raw.lxc: x}\n").unwrap();
        let config = v.get("config").unwrap();
        assert!(config.get("raw.lxc").is_none());
        assert!(config.get("<<").is_some());
    }
}
