//! What `corral incus NAME -- ARGS…` may run: a pure judgement of the
//! arguments, before anything reaches the backend's client.
//!
//! Two rules. Another instance of the project named anywhere in ARGS (as a
//! word, before a `/` as in `other/snap` or `other/path`, after a
//! `remote:`, as the value of a `key=value` word) is refused, always: the
//! hatch is for the one sandbox whose ownership corral checked. And an
//! argument that moves isolation (profiles, networks, devices, security
//! and raw settings, whole-config edits, moving, copying or publishing the
//! instance, another project, the raw API, daemon administration) is
//! refused unless the caller says `--i-know`; then it runs, and each one
//! is named with the isolation it moves. ARGS must name NAME itself, so
//! a command about the project as a whole (`list`) is refused too.

use std::collections::BTreeSet;

/// One isolation-moving argument and what it moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moves {
    /// The argument as given.
    pub arg: String,
    /// What it moves, in words.
    pub isolation: &'static str,
}

/// Why the arguments are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HatchRefusal {
    /// The sandbox is not an Incus instance.
    #[error(
        "`{name}` is a {kind} sandbox; `corral incus` runs Incus's client on Incus sandboxes only"
    )]
    NotIncus {
        /// The sandbox.
        name: String,
        /// Its backend.
        kind: corral_sandbox_core::SandboxKind,
    },
    /// Nothing to run.
    #[error("no incus arguments; expected `corral incus NAME -- ARGS…` with ARGS naming NAME")]
    Empty,
    /// ARGS do not name the sandbox.
    #[error(
        "the arguments do not name `{name}`; the escape hatch runs only commands on the sandbox it checked (e.g. `corral incus {name} -- info {name}`)"
    )]
    NameMissing {
        /// The sandbox.
        name: String,
    },
    /// ARGS name another instance of the project.
    #[error(
        "`{arg}` names instance `{other}`, not `{name}`; the escape hatch never touches another instance (not even with --i-know)"
    )]
    OtherInstance {
        /// The sandbox.
        name: String,
        /// The argument that named it.
        arg: String,
        /// The other instance.
        other: String,
    },
    /// Isolation-moving arguments without `--i-know`.
    #[error("{}; add --i-know to run it anyway", moves_text(.0))]
    MovesIsolation(Vec<Moves>),
}

fn moves_text(moves: &[Moves]) -> String {
    moves
        .iter()
        .map(|m| format!("`{}` moves isolation: {}", m.arg, m.isolation))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Words (dashes stripped, lower-cased) that move isolation, and what.
const WORDS: &[(&[&str], &str)] = &[
    (
        &["profile", "profiles"],
        "profiles can add NICs, disks and privileges outside the one bridge port corral gave the sandbox",
    ),
    (
        &["network", "networks"],
        "networks carry corral's bridges and their egress rules; a changed or added network bypasses them",
    ),
    (
        &["device", "devices"],
        "devices: a new NIC bypasses the sandbox's bridge port, a disk exposes host paths",
    ),
    (
        &["nic"],
        "NICs: another interface bypasses the sandbox's one filtered bridge port",
    ),
    (
        &["move", "mv"],
        "moving the instance takes it out of corral's records, project or host",
    ),
    (
        &["copy", "cp"],
        "a copy carries the sandbox's data (perhaps credentials) and escapes corral's checks",
    ),
    (
        &["publish"],
        "an image of the sandbox (perhaps holding credentials) leaves corral",
    ),
    (
        &["project", "projects"],
        "corral's project holds its restrictions and its instances; another project has neither",
    ),
    (
        &["query"],
        "the raw Incus API can change anything about any instance",
    ),
    (&["admin"], "daemon administration reaches every instance"),
    (
        &["storage"],
        "storage volumes attached to the sandbox share data with the host or other instances",
    ),
    (
        &["cluster"],
        "cluster commands move instances between hosts",
    ),
];

const SECURITY: &str = "security.* settings: privilege, nesting, idmaps, syscall interception — how close root in the sandbox is to root on the host";
const RAW: &str =
    "raw.* settings: raw LXC, idmap, AppArmor and seccomp configuration no check of corral sees";
const CONFIG_EDIT: &str =
    "`config edit` rewrites the whole instance configuration, devices and security included";

/// Judge `args` for `corral incus name -- args…`; `others` are every other
/// instance name of the project (corral's or not). `Ok` holds the
/// isolation-moving arguments allowed by `i_know` (empty without any).
pub fn judge(
    name: &str,
    args: &[String],
    others: &[String],
    i_know: bool,
) -> Result<Vec<Moves>, HatchRefusal> {
    if args.is_empty() {
        return Err(HatchRefusal::Empty);
    }
    let others: BTreeSet<&str> = others
        .iter()
        .map(String::as_str)
        .filter(|o| *o != name)
        .collect();
    let mut named = false;
    for arg in args {
        for candidate in names_in(arg) {
            if candidate == name {
                named = true;
            } else if others.contains(candidate) {
                return Err(HatchRefusal::OtherInstance {
                    name: name.to_owned(),
                    arg: arg.clone(),
                    other: candidate.to_owned(),
                });
            }
        }
    }
    if !named {
        return Err(HatchRefusal::NameMissing {
            name: name.to_owned(),
        });
    }
    let moves = isolation_moves(args);
    if moves.is_empty() || i_know {
        Ok(moves)
    } else {
        Err(HatchRefusal::MovesIsolation(moves))
    }
}

/// Every instance name `arg` could stand for: the word, the value of a
/// `key=value` word, each with a `remote:` prefix and a `/rest` suffix
/// taken off.
fn names_in(arg: &str) -> BTreeSet<&str> {
    let mut out = BTreeSet::new();
    let mut words = vec![arg];
    words.extend(arg.split_once('=').map(|(_, value)| value));
    for word in words {
        for w in [word, word.split_once(':').map_or(word, |(_, rest)| rest)] {
            out.insert(w);
            out.insert(w.split_once('/').map_or(w, |(first, _)| first));
        }
    }
    out
}

/// The isolation-moving arguments, in order, each once.
fn isolation_moves(args: &[String]) -> Vec<Moves> {
    // After `exec NAME … --` the words are the guest command's argv, which
    // runs inside the sandbox and moves nothing of the instance.
    let end = match args.first().map(String::as_str) {
        Some("exec") => args.iter().position(|a| a == "--").unwrap_or(args.len()),
        _ => args.len(),
    };
    let mut out: Vec<Moves> = Vec::new();
    let mut push = |arg: &str, isolation: &'static str| {
        if !out.iter().any(|m| m.arg == arg && m.isolation == isolation) {
            out.push(Moves {
                arg: arg.to_owned(),
                isolation,
            });
        }
    };
    let args = &args[..end];
    for (i, arg) in args.iter().enumerate() {
        let bare = arg.trim_start_matches('-').to_ascii_lowercase();
        let flag = bare.split_once('=').map_or(bare.as_str(), |(k, _)| k);
        for (words, isolation) in WORDS {
            if words.contains(&bare.as_str()) || (arg.starts_with('-') && words.contains(&flag)) {
                push(arg, isolation);
            }
        }
        if bare == "config" && args.get(i + 1).is_some_and(|next| next == "edit") {
            push("config edit", CONFIG_EDIT);
        }
        // `security.privileged`, `security.privileged=true`,
        // `--config=raw.lxc=…`, `-c security.nesting=true,…`.
        for part in bare.split(['=', ',']) {
            let key = part.trim_start_matches('-');
            if key.starts_with("security.") {
                push(arg, SECURITY);
            }
            if key.starts_with("raw.") {
                push(arg, RAW);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    const OTHERS: [&str; 3] = ["box", "other", "foreign"];

    fn judge_of(args: &[&str], i_know: bool) -> Result<Vec<Moves>, HatchRefusal> {
        judge("box", &v(args), &v(&OTHERS), i_know)
    }

    #[test]
    fn plain_commands_on_the_sandbox_pass_with_no_warning() {
        for args in [
            &["info", "box"][..],
            &["config", "show", "box"],
            &["config", "get", "box", "limits.cpu"],
            &["config", "set", "box", "limits.memory=2GiB"],
            &["snapshot", "list", "box"],
            &["file", "push", "/tmp/x", "box/root/x"],
            &["console", "box", "--show-log"],
            &["local:box"],
            &["exec", "box", "--", "cp", "/etc/profile", "/tmp/network"],
        ] {
            assert_eq!(judge_of(args, false), Ok(vec![]), "{args:?}");
        }
    }

    #[test]
    fn another_instance_is_refused_even_with_i_know() {
        for (args, arg) in [
            (&["info", "box", "other"][..], "other"),
            (
                &["file", "pull", "other/etc/passwd", "box/tmp/x"],
                "other/etc/passwd",
            ),
            (
                &["restore", "box", "x", "--from", "other/snap0"],
                "other/snap0",
            ),
            (&["info", "box", "local:other"], "local:other"),
            (&["copy", "box", "remote:other/snap"], "remote:other/snap"),
            (
                &["config", "set", "box", "user.peer=other"],
                "user.peer=other",
            ),
            (&["exec", "box", "--", "ping", "foreign"], "foreign"),
        ] {
            for i_know in [false, true] {
                let got = judge_of(args, i_know);
                assert!(
                    matches!(&got, Err(HatchRefusal::OtherInstance { arg: a, .. }) if a == arg),
                    "{args:?} {i_know}: {got:?}"
                );
            }
        }
    }

    #[test]
    fn the_sandbox_must_be_named() {
        for args in [
            &["list"][..],
            &["info"],
            &["info", "boxer"],
            &["info", "bo"],
        ] {
            assert_eq!(
                judge_of(args, true),
                Err(HatchRefusal::NameMissing { name: "box".into() }),
                "{args:?}"
            );
        }
        assert_eq!(judge_of(&[], true), Err(HatchRefusal::Empty));
    }

    #[test]
    fn isolation_moving_arguments_need_i_know_and_are_each_named() {
        for (args, arg, what) in [
            (
                &["profile", "add", "box", "default"][..],
                "profile",
                "profiles",
            ),
            (
                &["launch", "img", "box", "--profile=x"],
                "--profile=x",
                "profiles",
            ),
            (
                &["config", "device", "add", "box", "d", "disk"],
                "device",
                "a disk",
            ),
            (
                &["config", "device", "add", "box", "n", "nic"],
                "nic",
                "NIC",
            ),
            (
                &["network", "attach", "lxdbr0", "box"],
                "network",
                "networks",
            ),
            (
                &["config", "set", "box", "security.privileged", "true"],
                "security.privileged",
                "root on the host",
            ),
            (
                &["config", "set", "box", "security.nesting=true"],
                "security.nesting=true",
                "root on the host",
            ),
            (
                &["config", "set", "box", "RAW.LXC=x"],
                "RAW.LXC=x",
                "raw LXC",
            ),
            (
                &["init", "img", "box", "-c", "a=1,raw.idmap=both 0 0"],
                "a=1,raw.idmap=both 0 0",
                "raw LXC",
            ),
            (&["config", "edit", "box"], "config edit", "whole instance"),
            (&["move", "box", "box2"], "move", "corral's records"),
            (&["mv", "box", "box2"], "mv", "corral's records"),
            (&["copy", "box", "box2"], "copy", "escapes"),
            (&["cp", "box", "box2"], "cp", "escapes"),
            (&["publish", "box"], "publish", "image"),
            (
                &["info", "box", "--project", "default"],
                "--project",
                "corral's project",
            ),
            (
                &["info", "box", "--project=default"],
                "--project=default",
                "corral's project",
            ),
            (
                &["query", "/1.0/instances/box", "box"],
                "query",
                "raw Incus API",
            ),
            (
                &["exec", "box", "--project", "x", "--", "true"],
                "--project",
                "project",
            ),
        ] {
            let got = judge_of(args, false);
            let Err(HatchRefusal::MovesIsolation(moves)) = &got else {
                panic!("{args:?}: {got:?}");
            };
            assert!(
                moves
                    .iter()
                    .any(|m| m.arg == arg && m.isolation.contains(what)),
                "{args:?}: {moves:?}"
            );
            let text = got.clone().unwrap_err().to_string();
            assert!(text.contains("--i-know") && text.contains(arg), "{text}");
            let allowed = judge_of(args, true).unwrap();
            assert_eq!(&allowed, moves, "{args:?}");
        }
    }

    #[test]
    fn read_only_isolation_words_still_count() {
        let moves = judge_of(&["config", "device", "show", "box"], true).unwrap();
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].arg, "device");
    }

    #[test]
    fn a_name_equal_to_the_sandbox_in_the_others_list_is_not_another() {
        let got = judge("box", &v(&["info", "box"]), &v(&["box"]), false);
        assert_eq!(got, Ok(vec![]));
    }

    mod laws {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Wherever another instance's name hides in one argument, the
            /// arguments are refused, with or without --i-know.
            #[test]
            fn another_name_anywhere_is_refused(
                prefix in "[a-z]{0,6}(:|=)?",
                suffix in "(/[a-z0-9]{1,6})?",
                at in 0usize..3,
                i_know: bool,
            ) {
                let mut args = v(&["info", "box", "x"]);
                let prefix = if prefix.ends_with(['=', ':']) { prefix } else { String::new() };
                args.insert(at, format!("{prefix}other{suffix}"));
                let got = judge("box", &args, &v(&OTHERS), i_know);
                let is_other = matches!(got, Err(HatchRefusal::OtherInstance { .. }));
                prop_assert!(is_other, "{:?}: {:?}", args, got);
            }
        }
    }
}
