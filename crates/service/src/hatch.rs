//! What `corral incus NAME -- ARGS…` may run: a pure judgement of the
//! arguments, before anything reaches the backend's client.
//!
//! Three rules. Another instance of the project named anywhere in ARGS (as
//! a word, before a `/` as in `other/snap` or `other/path`, after a
//! `remote:`, as the value of a `key=value` word) is refused, always: the
//! hatch is for the one sandbox whose ownership corral checked. A command
//! that starts an instance, or makes one that can start, without corral's
//! start gate (`start`, `restart`, `restore`, `resume`, `copy`, `move`,
//! `publish`, `launch`, the raw API, `boot.autostart`) is refused, always,
//! naming corral's own verb that gates: every start of a sandbox goes
//! through the gate, the topology check and the canary. And an argument
//! that moves isolation (profiles, networks, devices, security and raw
//! settings, whole-config edits, another project, daemon administration)
//! is refused unless the caller says `--i-know`; then it runs, and each
//! one is named with the isolation it moves. ARGS must name NAME itself,
//! so a command about the project as a whole (`list`) is refused too.
//!
//! Words are matched anywhere before an `exec`'s guest command, not only
//! as the verb: global flags may come first (`-q start`, `--project x
//! start`) and a sub-command may carry the word (`snapshot restore`,
//! `cluster restore`). Incus's client expands the user's aliases (which
//! may shadow any command) before it parses, so the client the hatch runs
//! has alias expansion off (see the Incus provider's terminal module): the
//! words judged here are the words Incus runs.

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
    /// A command that would start the sandbox (or an instance made from
    /// it) outside corral's start gate.
    #[error(
        "`{arg}` {what}, outside corral's start gate (refused even with --i-know); use `{instead}`, which gates"
    )]
    Ungated {
        /// The argument as given.
        arg: String,
        /// What it does, in words.
        what: &'static str,
        /// corral's own verb for it, with the sandbox's name.
        instead: String,
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
        &["project", "projects"],
        "corral's project holds its restrictions and its instances; another project has neither",
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

/// Words (lower-cased, as given) that start an instance outside the gate:
/// what they do and corral's verb (`{name}`: the sandbox) that gates. Each
/// alias Incus's client accepts for a command is listed with it.
const UNGATED: &[(&[&str], &str, &str)] = &[
    (&["start"], "starts the instance", "corral start {name}"),
    (
        &["restart"],
        "starts the instance again",
        "corral restart {name}",
    ),
    (
        &["restore"],
        "puts a snapshot back and starts the instance again when it was running",
        "corral restore {name} SNAP",
    ),
    (
        &["resume", "unfreeze"],
        "lets a paused instance run again with no fresh check of its isolation",
        "corral restart {name}",
    ),
    (
        &["copy", "cp"],
        "makes a copy of the sandbox (its data, perhaps credentials) that starts with no gate",
        "corral new NEW --from {name}[/SNAP]",
    ),
    (
        &["move", "mv"],
        "moves the instance (renamed, to another project or host) out of corral's records and gate",
        "corral rename {name} NEW",
    ),
    (
        &["publish"],
        "makes an image of the sandbox (perhaps holding credentials) that launches with no gate",
        "corral export {name}",
    ),
    (
        &["launch"],
        "creates and starts an instance with no gate",
        "corral new NAME",
    ),
    (
        &["query"],
        "sends a raw Incus API request, which can start any instance with no gate",
        "corral start {name} (or corral's other verbs)",
    ),
];

/// Settings with which the daemon starts the instance by itself.
const AUTOSTART: (&str, &str, &str) = (
    "boot.autostart",
    "has the Incus daemon start the instance at boot",
    "corral start {name}",
);

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
    if let Some(refusal) = ungated(name, args) {
        return Err(refusal);
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

/// Incus's global flags that take no value; any other flag before the
/// verb is read as taking the next word (as the client's parser does).
const BOOL_FLAGS: &[&str] = &[
    "--all",
    "--debug",
    "--force-local",
    "--help",
    "-h",
    "--quiet",
    "-q",
    "--sub-commands",
    "--verbose",
    "-v",
    "--version",
];

/// The words that are Incus's to read: all of them, but for an `exec`
/// only those before its `--` (after it comes the guest command's argv,
/// which runs inside the sandbox and moves nothing of the instance).
fn client_words(args: &[String]) -> &[String] {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            return args;
        }
        if !arg.starts_with('-') {
            break;
        }
        let takes_value = !arg.contains('=') && !BOOL_FLAGS.contains(&arg.as_str());
        i += if takes_value { 2 } else { 1 };
    }
    if args.get(i).is_some_and(|verb| verb == "exec") {
        let end = args[i..]
            .iter()
            .position(|a| a == "--")
            .map_or(args.len(), |p| i + p);
        return &args[..end];
    }
    args
}

/// The first argument that starts an instance outside the gate.
fn ungated(name: &str, args: &[String]) -> Option<HatchRefusal> {
    let refusal = |arg: &String, what: &'static str, instead: &str| HatchRefusal::Ungated {
        arg: arg.clone(),
        what,
        instead: instead.replace("{name}", name),
    };
    for arg in client_words(args) {
        let word = arg.to_ascii_lowercase();
        if let Some((_, what, instead)) =
            UNGATED.iter().find(|(w, _, _)| w.contains(&word.as_str()))
        {
            return Some(refusal(arg, what, instead));
        }
        // `boot.autostart=true`, `-c boot.autostart=1,…`, `boot.autostart true`.
        let (key, what, instead) = AUTOSTART;
        if word
            .split(['=', ','])
            .any(|part| part.trim_start_matches('-').starts_with(key))
        {
            return Some(refusal(arg, what, instead));
        }
    }
    None
}

/// The isolation-moving arguments, in order, each once.
fn isolation_moves(args: &[String]) -> Vec<Moves> {
    let mut out: Vec<Moves> = Vec::new();
    let mut push = |arg: &str, isolation: &'static str| {
        if !out.iter().any(|m| m.arg == arg && m.isolation == isolation) {
            out.push(Moves {
                arg: arg.to_owned(),
                isolation,
            });
        }
    };
    let args = client_words(args);
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
                &["create", "img", "box", "--profile=x"],
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

    /// Every word that starts an instance outside the gate, each alias
    /// Incus accepts for it, with and without --i-know, as the verb, after
    /// global flags and as a sub-command: refused, naming corral's verb.
    #[test]
    fn every_ungated_start_is_refused_even_with_i_know_naming_corrals_verb() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["start", "box"], "start", "corral start box"),
            (&["restart", "box"], "restart", "corral restart box"),
            (
                &["restore", "box", "snap0"],
                "restore",
                "corral restore box SNAP",
            ),
            (
                &["snapshot", "restore", "box", "snap0"],
                "restore",
                "corral restore box SNAP",
            ),
            (&["resume", "box"], "resume", "corral restart box"),
            (&["unfreeze", "box"], "unfreeze", "corral restart box"),
            (
                &["copy", "box", "box2"],
                "copy",
                "corral new NEW --from box",
            ),
            (&["cp", "box", "box2"], "cp", "corral new NEW --from box"),
            (&["copy", "box/snap0", "box2"], "copy", "--from box[/SNAP]"),
            (&["move", "box", "box2"], "move", "corral rename box NEW"),
            (&["mv", "box", "box2"], "mv", "corral rename box NEW"),
            (&["publish", "box"], "publish", "corral export box"),
            (&["launch", "img", "box"], "launch", "corral new NAME"),
            (
                &["query", "/1.0/instances/box/state", "box"],
                "query",
                "corral start box",
            ),
            (
                &["config", "set", "box", "boot.autostart=true"],
                "boot.autostart=true",
                "corral start box",
            ),
            (
                &["config", "set", "box", "boot.autostart", "1"],
                "boot.autostart",
                "corral start box",
            ),
            (&["START", "box"], "START", "corral start box"),
        ];
        let prefixes: &[&[&str]] = &[
            &[],
            &["-q"],
            &["--quiet"],
            &["--debug", "-v"],
            &["--project", "x"],
            &["--project=x"],
            &["--force-local"],
        ];
        for (args, arg, instead) in cases {
            for prefix in prefixes {
                let mut all: Vec<&str> = prefix.to_vec();
                all.extend_from_slice(args);
                for i_know in [false, true] {
                    let got = judge_of(&all, i_know);
                    let Err(HatchRefusal::Ungated {
                        arg: a,
                        instead: use_,
                        ..
                    }) = &got
                    else {
                        panic!("{all:?} {i_know}: {got:?}");
                    };
                    assert_eq!(a, arg, "{all:?}");
                    assert!(use_.contains(instead), "{all:?}: {use_}");
                    let text = got.clone().unwrap_err().to_string();
                    assert!(
                        text.contains("start gate")
                            && text.contains("even with --i-know")
                            && text.contains(instead),
                        "{text}"
                    );
                }
            }
        }
    }

    /// The same words inside an exec's guest command run in the sandbox
    /// and start nothing (control: the words above, outside it, are
    /// refused), with global flags before `exec` too.
    #[test]
    fn ungated_words_in_an_execs_guest_command_are_the_guests() {
        for args in [
            &["exec", "box", "--", "start", "x"][..],
            &["-q", "exec", "box", "--", "restart"],
            &["--debug", "-v", "exec", "box", "--", "cp", "a", "b"],
            &["exec", "box", "--", "sh", "-c", "mv a b; publish"],
        ] {
            assert_eq!(judge_of(args, false), Ok(vec![]), "{args:?}");
        }
        // A global flag's value is not the verb: the guest command after
        // `--project corral exec box --` is still the guest's.
        let moves = judge_of(
            &["--project", "corral", "exec", "box", "--", "cp", "a", "b"],
            true,
        )
        .unwrap();
        assert_eq!(moves.len(), 1, "{moves:?}");
        assert_eq!(moves[0].arg, "--project");
        // Before the `--` an exec's own words still count.
        let got = judge_of(
            &["exec", "box", "--env", "boot.autostart=1", "--", "true"],
            true,
        );
        assert!(matches!(got, Err(HatchRefusal::Ungated { .. })), "{got:?}");
    }

    /// A `--` before any verb ends the client's flags and leaves no
    /// command: every word is still judged.
    #[test]
    fn a_leading_double_dash_hides_nothing() {
        let got = judge_of(&["--", "start", "box"], true);
        assert!(matches!(got, Err(HatchRefusal::Ungated { .. })), "{got:?}");
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
