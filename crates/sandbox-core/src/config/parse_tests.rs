//! Bad-config cases: each asserts its exact message (file, line, column,
//! section, field), and that nothing was loaded.

use super::*;

fn errs(text: &str) -> Vec<String> {
    Config::from_toml_str(text, "corral.toml")
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn one(text: &str) -> String {
    let all = errs(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.into_iter().next().unwrap()
}

/// A `[[profile]]` section; `extra` lines are appended.
fn prof(name: &str, bridge: &str, subnet: &str, extra: &str) -> String {
    format!(
        "[[profile]]\nname = \"{name}\"\nbridge = \"{bridge}\"\nsubnet = \"{subnet}\"\n{extra}\n"
    )
}

fn none(name: &str, bridge: &str, subnet: &str) -> String {
    prof(name, bridge, subnet, "mode = \"none\"")
}

#[test]
fn a_good_file_loads() {
    let text = format!(
        "[host]\nuplink = \"eth0\"\ndns_upstreams = \
            [\"192.0.2.53\"]\nattested_executors = \
            [\"incus-remote\"]\n\n{}{}[phases]\nwork = \"dev\"\n",
        none("iso", "br-iso", "10.9.1.0/24"),
        prof(
            "dev",
            "br-dev",
            "10.9.2.0/24",
            "subnet_v6 = \"fd00:9:2::/64\"\nmode = \"allowlist\"\nallow = \
                [\"api.example.com:443\", \"*.example.net\", \
                \"[2001:db8::1]:22/tcp\"]\nblock = \"drop\"\ndns = \
                \"off\"\nallow_unresolved = true"
        ),
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    assert_eq!(cfg.profiles.len(), 2);
    let dev = cfg.profiles.get("dev").unwrap();
    assert_eq!(dev.allow.len(), 3);
    assert_eq!(dev.block, crate::profile::BlockAction::Drop);
    assert_eq!(cfg.host.uplink.unwrap().as_str(), "eth0");
    assert_eq!(cfg.phases.name_for(Phase::Rework).unwrap().as_str(), "dev");
}

#[test]
fn bridge_too_long() {
    assert_eq!(
        one(&none("dev", "corral-way-too-long", "10.0.0.0/24")),
        "corral.toml:3:10: profile \"dev\": bridge: bridge name \
            `corral-way-too-long` is 19 bytes long; the limit is 15 bytes"
    );
}

#[test]
fn bridge_bad_character() {
    assert_eq!(
        one(&none("dev", "br/0", "10.0.0.0/24")),
        "corral.toml:3:10: profile \"dev\": bridge: bridge name `br/0` is \
            invalid: character '/' is not allowed; expected 1 to 15 bytes of \
            [A-Za-z0-9_.-], not `.` or `..`"
    );
}

#[test]
fn duplicate_names() {
    let text = none("dev", "br-a", "10.0.1.0/24") + &none("dev", "br-b", "10.0.2.0/24");
    assert_eq!(
        one(&text),
        "corral.toml:7:8: profile \"dev\": name: profile name \"dev\" is used \
            twice; give each profile its own name"
    );
}

#[test]
fn duplicate_bridges() {
    let text = none("a", "br-a", "10.0.1.0/24") + &none("b", "br-a", "10.0.2.0/24");
    assert_eq!(
        one(&text),
        "corral.toml:8:10: profile \"b\": bridge: bridge \"br-a\" is already used \
            by profile \"a\"; each profile needs its own bridge"
    );
}

#[test]
fn overlapping_v4() {
    let text = none("a", "br-a", "10.0.0.0/16") + &none("b", "br-b", "10.0.7.0/24");
    assert_eq!(
        one(&text),
        "corral.toml:9:10: profile \"b\": subnet: 10.0.7.0/24 overlaps \
            10.0.0.0/16 of profile \"a\"; give each profile a separate subnet"
    );
}

#[test]
fn overlapping_v6_is_checked_separately() {
    let a = prof(
        "a",
        "br-a",
        "10.0.1.0/24",
        "subnet_v6 = \"fd00:1::/48\"\nmode = \"none\"",
    );
    let b = prof(
        "b",
        "br-b",
        "10.0.2.0/24",
        "subnet_v6 = \"fd00:1:0:5::/64\"\nmode = \"none\"",
    );
    assert_eq!(
        one(&(a + &b)),
        "corral.toml:11:13: profile \"b\": subnet_v6: fd00:1:0:5::/64 overlaps \
            fd00:1::/48 of profile \"a\"; give each profile a separate subnet"
    );
}

#[test]
fn subnet_too_small() {
    assert_eq!(
        one(&none("a", "br-a", "10.0.0.0/30")),
        "corral.toml:4:10: profile \"a\": subnet: 10.0.0.0/30 is too small: a profile needs a gateway plus at least 2 sandboxes, so the IPv4 prefix must be /29 or shorter"
    );
    let v6 = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "subnet_v6 = \"fd00::/124\"\nmode = \"none\"",
    );
    assert_eq!(
        one(&v6),
        "corral.toml:5:13: profile \"a\": subnet_v6: fd00::/124 is too small: a profile needs a gateway plus at least 2 sandboxes, so the IPv6 prefix must be /120 or shorter"
    );
}

#[test]
fn unknown_keys_name_the_key_and_the_valid_ones() {
    let text = "[[profile]]\nname = \"dev\"\nbrige = \"x\"\n";
    assert_eq!(
        one(text),
        "corral.toml:3:1: profile \"dev\": unknown field `brige`, expected one of \
            `name`, `bridge`, `subnet`, `subnet_v6`, `mode`, `allow`, `block`, \
            `dns`, `allow_unresolved`, `deny`, `learned_max`, `max_flows_per_source`, \
            `new_flows_per_second`, `approvals`, `approval_timeout`"
    );
    let text = format!(
        "[host]\nstate_dirr = \"/x\"\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert_eq!(
        one(&text),
        "corral.toml:2:1: host: unknown field `state_dirr`, expected one of \
            `state_dir`, `uplink`, `multipass_bridge`, `dns_upstreams`, \
            `attested_executors`, `deny`, `verification`, `watch`"
    );
    let text = format!(
        "[host]\nuplink = \"eth0\"\n[host.verification]\ncanari = \"x\"\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert_eq!(
        one(&text),
        "corral.toml:4:1: host.verification: unknown field `canari`, expected one \
            of `kinds`, `canary`, `canary_v6`, `unlisted_name`, \
            `check_timeout_secs`, `cool_down_secs`, `reverify_interval_secs`, \
            `max_probe_output_bytes`"
    );
    let text = format!("colour = 1\n{}", none("a", "br-a", "10.0.0.0/24"));
    assert_eq!(
        one(&text),
        "corral.toml:1:1: unknown key `colour`; valid top-level keys are host, profile, phases"
    );
}

#[test]
fn invalid_host_names() {
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"allowlist\"\nallow = [\"api.example.com\", \"bad_name.example.com\"]",
    );
    assert_eq!(
        one(&text),
        "corral.toml:6:29: profile \"a\": allow: allow entry \
            `bad_name.example.com` is invalid: host name `bad_name.example.com` is \
            invalid: character '_' is not allowed; expected a DNS name of \
            dot-separated labels of [A-Za-z0-9-] (1 to 63 each, no leading or \
            trailing `-`), at most 253 characters"
    );
}

#[test]
fn bad_ports_and_ranges() {
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"allowlist\"\nallow = [\n  \"x.example.com:0\",\n  \"x.example.com:90-80\",\n  \"x.example.com:70000\",\n]",
    );
    assert_eq!(
        errs(&text),
        [
            "corral.toml:7:3: profile \"a\": allow: allow entry `x.example.com:0` is \
                invalid: port 0 is not a destination port; use 1 to 65535",
            "corral.toml:8:3: profile \"a\": allow: allow entry `x.example.com:90-80` \
                is invalid: port range 90-80 is backwards; write the lower port first",
            "corral.toml:9:3: profile \"a\": allow: allow entry `x.example.com:70000` \
                is invalid: port `70000` is not a number from 1 to 65535",
        ]
    );
}

#[test]
fn empty_allowlist() {
    assert_eq!(
        one(&prof("a", "br-a", "10.0.0.0/24", "mode = \"allowlist\"")),
        "corral.toml:5:8: profile \"a\": allow: mode is allowlist but the \
            allowlist is empty; add entries, or use mode \"none\" for no egress"
    );
}

#[test]
fn allow_entries_outside_allowlist_mode() {
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"none\"\nallow = [\"192.0.2.1\"]",
    );
    assert_eq!(
        one(&text),
        "corral.toml:6:10: profile \"a\": allow: allow entries have no effect in \
            mode \"none\"; remove them, or set mode = \"allowlist\""
    );
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"internet\"\nallow = [\"192.0.2.1\"]",
    );
    assert!(
        one(&text)
            .ends_with("no effect in mode \"internet\"; remove them, or set mode = \"allowlist\"")
    );
}

#[test]
fn multipass_bridge_collision() {
    let text = none("a", "mpqemubr0", "10.0.0.0/24");
    assert_eq!(
        one(&text),
        "corral.toml:3:10: profile \"a\": bridge: bridge \"mpqemubr0\" is \
            Multipass's control bridge (host.multipass_bridge), whose forwarding \
            corral blocks; choose another bridge name"
    );
    let text = format!(
        "[host]\nmultipass_bridge = \"br-a\"\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert!(
        one(&text)
            .starts_with("corral.toml:5:10: profile \"a\": bridge: bridge \"br-a\" is Multipass's")
    );
}

#[test]
fn phase_names_unknown_profile() {
    let text = none("a", "br-a", "10.0.0.0/24") + "[phases]\nwork = \"a\"\nmerge = \"nope\"\n";
    assert_eq!(
        one(&text),
        "corral.toml:8:9: phases: merge: profile \"nope\" is not configured; configured profiles: a"
    );
}

#[test]
fn bad_values_of_each_kind() {
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/33",
        "subnet_v6 = \"fd00::\"\nmode = \"open\"\nblock = \"ignore\"\ndns = \"google\"",
    );
    assert_eq!(
        errs(&text),
        [
            "corral.toml:4:10: profile \"a\": subnet: `10.0.0.0/33` is not an IPv4 \
                subnet; write a CIDR such as \"10.231.1.0/24\"",
            "corral.toml:5:13: profile \"a\": subnet_v6: `fd00::` is not an IPv6 \
                subnet; write a CIDR such as \"fd00:c0a1:1::/64\"",
            "corral.toml:6:8: profile \"a\": mode: unknown mode `open`; expected one \
                of none, internet, allowlist",
            "corral.toml:7:9: profile \"a\": block: unknown block action `ignore`; \
                expected reject or drop",
            "corral.toml:8:7: profile \"a\": dns: unknown dns policy `google`; \
                expected gateway, corral or off",
        ]
    );
}

#[test]
fn host_settings_are_checked() {
    let text = format!(
        "[host]\nstate_dir = \"var/corral\"\nuplink = \"eth 0\"\ndns_upstreams = \
            [\"dns.example\"]\nattested_executors = [\"incus\", \"cloud\"]\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert_eq!(
        errs(&text),
        [
            "corral.toml:2:13: host: state_dir: `var/corral` is not an absolute path; \
                write it from the root, e.g. /var/lib/corral",
            "corral.toml:3:10: host: uplink: interface name `eth 0` is invalid: \
                character ' ' is not allowed; expected 1 to 15 bytes of [A-Za-z0-9_.-], \
                not `.` or `..`",
            "corral.toml:4:18: host: dns_upstreams: `dns.example` is not an IP \
                address; list resolver addresses such as \"192.0.2.53\" (names cannot be \
                resolved before a resolver is known)",
            "corral.toml:5:23: host: attested_executors: incus runs on this host, not \
                on an executor; only incus-remote, multipass-remote and sprites can be \
                attested",
            "corral.toml:5:32: host: attested_executors: unknown sandbox kind \
                `cloud`; expected one of incus, incus-remote, multipass, \
                multipass-remote, tart, sprites, bubblewrap, process",
        ]
    );
}

#[test]
fn verification_settings_are_checked() {
    let text = format!(
        "[host.verification]\nkinds = [\"tart\", \"incus\"]\ncanary = \
            \"10.1.2.3:443\"\ncheck_timeout_secs = 60\ncool_down_secs = 0\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert_eq!(
        errs(&text),
        [
            "corral.toml:2:10: host.verification: canary_v6: kinds opts in to \
                verification, so `canary_v6` is required: the canary cannot run without \
                it",
            "corral.toml:2:10: host.verification: unlisted_name: kinds opts in to \
                verification, so `unlisted_name` is required: the canary cannot run \
                without it",
            "corral.toml:2:18: host.verification: kinds: incus has no provider-host \
                filter to verify; only tart can be opted in to per-sandbox verification",
            "corral.toml:3:10: host.verification: canary: 10.1.2.3 is a private \
                address: it would fail even without a filter, so it proves nothing; use \
                a public address you control",
            "corral.toml:4:22: host.verification: check_timeout_secs: 60 s is out of \
                range; use 1 to 30 seconds (default 5)",
            "corral.toml:5:18: host.verification: cool_down_secs: 0 would re-admit a \
                failed kind at once; use a positive number of seconds (default 900)",
        ]
    );
}

#[test]
fn every_problem_is_reported_and_nothing_loads() {
    let text = none("a", "corral-way-too-long", "10.0.0.0/24")
        + &prof("b", "br-b", "10.0.0.0/24", "mode = \"allowlist\"")
        + &none("c", "br-c", "10.0.9.0/30");
    let all = errs(&text);
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(all[0].contains("profile \"a\": bridge:"));
    assert!(all[1].contains("profile \"b\": allow:"));
    assert!(all[2].contains("profile \"c\": subnet:"));
    assert!(
        Config::from_toml_str(&text, "corral.toml")
            .unwrap_err()
            .to_string()
            .starts_with("3 problems; nothing was loaded:\n  corral.toml:3:10:")
    );
}

#[test]
fn syntax_errors_have_positions() {
    let all = errs("[[profile]]\nname = \"a\nbridge = 1\n");
    assert!(all[0].starts_with("corral.toml:2:"), "{all:#?}");
}

#[test]
fn no_profiles() {
    assert_eq!(
        one("[host]\n"),
        "corral.toml: profile: no [[profile]] sections; define at least one profile"
    );
}

#[test]
fn the_annotated_example_loads_and_round_trips() {
    let text = include_str!("../../../../examples/corral.toml");
    let cfg = Config::from_toml_str(text, "examples/corral.toml").unwrap();
    assert_eq!(cfg.profiles.names(), ["isolated", "internet", "allowlist"]);
    assert_eq!(cfg.host.verification.kinds, [crate::SandboxKind::Tart]);
    assert_eq!(
        cfg.phases.name_for(Phase::Rework).unwrap().as_str(),
        "allowlist"
    );
    let again = Config::from_toml_str(&cfg.to_toml_string(), "rt").unwrap();
    assert_eq!(again, cfg);
}

#[test]
fn a_state_dir_that_could_add_a_dnsmasq_directive_is_refused() {
    for (dir, named) in [
        ("/x\\nconf-file=/y", "the control character `\\n` (U+000A)"),
        ("/x\\rz", "the control character `\\r` (U+000D)"),
        ("/var/lib/a b", "a space (U+0020)"),
        ("/var/lib/a\\tb", "the control character `\\t` (U+0009)"),
        ("/var/lib/a#b", "`#` (U+0023)"),
    ] {
        let e = one(&format!(
            "[host]\nstate_dir = \"{dir}\"\n{}",
            none("a", "cb-a", "10.99.1.0/24")
        ));
        assert!(
            e.contains(&format!("host: state_dir: the path holds {named}, which"))
                && !e.contains('\n')
                && !e.contains("  "),
            "{dir}: {e}"
        );
    }
}

#[test]
fn deny_lists_load_round_trip_and_name_bad_entries() {
    let text = format!(
        "[host]\ndeny = [\"192.0.2.0/24\", \"2001:db8:dead::/48\", \"198.51.100.7\"]\n\n{}",
        prof(
            "web",
            "br-web",
            "10.9.2.0/24",
            "mode = \"internet\"\ndeny = [\"203.0.113.0/25\"]"
        )
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    let want: Vec<ipnet::IpNet> = ["192.0.2.0/24", "2001:db8:dead::/48", "198.51.100.7/32"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(cfg.host.deny, want);
    let web = cfg.profiles.get("web").unwrap();
    assert_eq!(web.deny, vec!["203.0.113.0/25".parse().unwrap()]);
    let back = Config::from_toml_str(&cfg.to_toml_string(), "rt").unwrap();
    assert_eq!(back, cfg);

    let e = one(&prof(
        "web",
        "br-web",
        "10.9.2.0/24",
        "mode = \"internet\"\ndeny = [\"lan\"]",
    ));
    assert!(
        e.contains("corral.toml:6")
            && e.contains("deny")
            && e.contains("`lan` is not an address or CIDR"),
        "{e}"
    );
}

#[test]
fn learned_max_has_a_default_and_a_range() {
    let base = "[[profile]]\nname = \"dev\"\nbridge = \"br-dev\"\nsubnet = \"10.0.0.0/24\"\nmode = \"none\"\n";
    let c = Config::from_toml_str(base, "corral.toml").unwrap();
    assert_eq!(
        c.profiles.get("dev").unwrap().learned_max,
        crate::profile::DEFAULT_LEARNED_MAX
    );
    let c = Config::from_toml_str(&format!("{base}learned_max = 256\n"), "corral.toml").unwrap();
    assert_eq!(c.profiles.get("dev").unwrap().learned_max, 256);
    for bad in ["0", "-1", "65537"] {
        assert_eq!(
            one(&format!("{base}learned_max = {bad}\n")),
            format!(
                "corral.toml:6:15: profile \"dev\": learned_max: learned_max = {bad} is out of range; \
                 expected addresses per learned set from 1 to 65536 (default 1024)"
            )
        );
    }
}

#[test]
fn approvals_ask_needs_an_allowlist_on_corrals_resolver_and_a_timeout_in_range() {
    let base = "[[profile]]\nname = \"dev\"\nbridge = \"br-dev\"\nsubnet = \"10.0.0.0/24\"\nmode = \"allowlist\"\nallow = [\"api.example.com\"]\nallow_unresolved = true\n";
    let approvals = |extra: &str| {
        Config::from_toml_str(&format!("{base}{extra}"), "corral.toml")
            .unwrap()
            .profiles
            .get("dev")
            .unwrap()
            .approvals
    };
    assert_eq!(approvals(""), crate::Approvals::Off);
    assert_eq!(
        approvals("dns = \"corral\"\napprovals = \"ask\"\n"),
        crate::Approvals::Ask { timeout_secs: 30 }
    );
    assert_eq!(
        approvals("dns = \"corral\"\napprovals = \"ask\"\napproval_timeout = 5\n"),
        crate::Approvals::Ask { timeout_secs: 5 }
    );
    assert_eq!(
        one(&format!("{base}approvals = \"ask\"\n")),
        "corral.toml:8:13: profile \"dev\": approvals: approvals = \"ask\" needs mode = \"allowlist\" \
         and dns = \"corral\": only corral's resolver can hold a lookup while the operator decides, \
         and only an allowlist has names it does not list"
    );
    assert_eq!(
        one(&format!("{base}dns = \"corral\"\napprovals = \"maybe\"\n")),
        "corral.toml:9:13: profile \"dev\": approvals: unknown approvals `maybe`; expected off or ask"
    );
    assert_eq!(
        one(&format!(
            "{base}dns = \"corral\"\napprovals = \"ask\"\napproval_timeout = 0\n"
        )),
        "corral.toml:10:20: profile \"dev\": approval_timeout: approval_timeout = 0 is out of range; \
         expected seconds a lookup waits for the operator, from 1 to 300 (default 30)"
    );
    assert_eq!(
        one(&format!("{base}approval_timeout = 5\n")),
        "corral.toml:8:20: profile \"dev\": approval_timeout: approval_timeout without approvals = \
         \"ask\"; add it or remove this line"
    );
}

#[test]
fn flow_limits_default_parse_and_refuse_out_of_range_values() {
    let cfg = Config::from_toml_str(&none("a", "br-a", "10.0.0.0/24"), "corral.toml").unwrap();
    let p = cfg.profiles.iter().next().unwrap();
    assert_eq!(p.flows, crate::FlowLimits::default());
    assert_eq!(p.flows.max_per_source, 2_048);
    assert_eq!(p.flows.new_per_second, 200);
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"internet\"\nmax_flows_per_source = 64\nnew_flows_per_second = 5",
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    let p = cfg.profiles.iter().next().unwrap();
    assert_eq!((p.flows.max_per_source, p.flows.new_per_second), (64, 5));
    let round = Config::from_toml_str(&cfg.to_toml_string(), "rt").unwrap();
    assert_eq!(round, cfg);
    let bad = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"internet\"\nmax_flows_per_source = 0",
    );
    let e = one(&bad);
    assert!(
        e.starts_with("corral.toml:")
            && e.contains("max_flows_per_source")
            && e.contains("expected a whole number from 1 to 1000000"),
        "{e}"
    );
}

#[test]
fn host_watch_defaults_values_round_trip_and_errors_point_at_the_key() {
    use super::{WatchConfig, WatchReaction};
    let cfg = Config::from_toml_str(&none("a", "br-a", "10.0.0.0/24"), "corral.toml").unwrap();
    assert_eq!(cfg.host.watch, WatchConfig::default());
    assert_eq!(cfg.host.watch.reaction, WatchReaction::Heal);
    assert!(
        !cfg.to_toml_string().contains("watch"),
        "defaults not written"
    );

    let text = format!(
        "[host.watch]\nreaction = \"cut\"\nsettle_ms = 50\ninterval_secs = 5\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    assert_eq!(
        cfg.host.watch,
        WatchConfig {
            reaction: WatchReaction::Cut,
            settle: std::time::Duration::from_millis(50),
            interval: std::time::Duration::from_secs(5),
        }
    );
    let back = Config::from_toml_str(&cfg.to_toml_string(), "rt").unwrap();
    assert_eq!(back, cfg);

    let text = format!(
        "[host.watch]\nreaction = \"ignore\"\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    let e = one(&text);
    assert!(
        e.starts_with("corral.toml:2:")
            && e.contains("host.watch")
            && e.contains("reaction")
            && e.contains("\"heal\""),
        "{e}"
    );
    let text = format!(
        "[host.watch]\nsettle_ms = 0\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert!(one(&text).contains("settle_ms"), "{}", one(&text));
    let text = format!(
        "[host.watch]\nreacton = \"cut\"\n{}",
        none("a", "br-a", "10.0.0.0/24")
    );
    assert!(
        one(&text).contains("unknown field `reacton`"),
        "{}",
        one(&text)
    );
}

/// Every problem of a file in one pass: several bad keys in one section
/// (serde stops at the first), the semantic checks of a section that also
/// had a bad key, and a profile that collides with a `[host]` that is
/// itself partly invalid. Control: each problem alone is reported too, so
/// none of them is an artefact of the others.
#[test]
fn every_problem_of_a_file_in_one_pass() {
    let problems = [
        // [host]: an unknown key, a wrong type, a bad path, and a valid
        // uplink a profile collides with.
        ("[host]\n", ""),
        ("colour = \"blue\"\n", "unknown field `colour`"),
        ("dns_upstreams = \"192.0.2.53\"\n", "invalid type"),
        ("state_dir = \"/var/lib/a b\"\n", "the path holds a space"),
        ("uplink = \"corral-up\"\n", ""),
        // A profile with two bad keys and two semantic problems.
        ("[[profile]]\nname = \"dev\"\n", ""),
        ("bridge = \"corral-up\"\n", "is the host's uplink"),
        ("subnet = \"10.9.1.0/33\"\n", "is not an IPv4 subnet"),
        ("mode = \"sometimes\"\n", "unknown mode `sometimes`"),
        ("learned_max = \"many\"\n", "invalid type"),
        ("colour = \"red\"\n", "unknown field `colour`"),
    ];
    let text: String = problems.iter().map(|(l, _)| *l).collect();
    let all = errs(&text);
    let wanted: Vec<&str> = problems
        .iter()
        .map(|(_, w)| *w)
        .filter(|w| !w.is_empty())
        .collect();
    assert_eq!(all.len(), wanted.len(), "{all:#?}");
    for (e, w) in all.iter().zip(&wanted) {
        assert!(e.contains(w), "expected `{w}` in order, got {all:#?}");
    }
    // Each line's problem is on that line (file order).
    let lines: Vec<usize> = Config::from_toml_str(&text, "corral.toml")
        .unwrap_err()
        .iter()
        .map(|e| e.line.unwrap())
        .collect();
    assert_eq!(lines, [2, 3, 4, 8, 9, 10, 11, 12], "{all:#?}");

    // Control: with every other problem fixed, each is still reported.
    let good = "[host]\nuplink = \"corral-up\"\n[[profile]]\nname = \"dev\"\n\
                bridge = \"corral-dev\"\nsubnet = \"10.9.1.0/24\"\nmode = \"none\"\n";
    assert!(Config::from_toml_str(good, "corral.toml").is_ok());
    for (bad, w) in [
        ("[host]\ncolour = \"blue\"\n", "unknown field `colour`"),
        (
            "[host]\nstate_dir = \"/var/lib/a b\"\n",
            "the path holds a space",
        ),
        ("mode = \"sometimes\"\n", "unknown mode"),
        ("bridge = \"corral-up\"\n", "is the host's uplink"),
    ] {
        let text = if bad.starts_with("[host]") {
            good.replacen("[host]\n", bad, 1)
        } else {
            let key = bad.split(' ').next().unwrap();
            good.lines()
                .map(|l| {
                    if l.starts_with(key) {
                        bad.trim_end().to_owned()
                    } else {
                        l.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let e = one(&text);
        assert!(e.contains(w), "{text}: {e}");
    }
}

/// A misspelt required key is one problem, not also "missing field"; a
/// required key that is really absent beside an unknown one is both.
#[test]
fn a_misspelt_key_is_not_also_missing() {
    let e = one(
        "[[profile]]\nname = \"dev\"\nbrige = \"br-dev\"\nsubnet = \"10.9.1.0/24\"\nmode = \"none\"\n",
    );
    assert!(e.contains("unknown field `brige`"), "{e}");
    let all = errs(
        "[[profile]]\nname = \"dev\"\ncolour = \"red\"\nsubnet = \"10.9.1.0/24\"\nmode = \"none\"\n",
    );
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all[0].contains("missing field `bridge`"), "{all:#?}");
    assert!(all[1].contains("unknown field `colour`"), "{all:#?}");
}

#[test]
fn corrals_gateway_serves_every_mode() {
    // On `none` it is the leases and advertisements alone (no resolver).
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"none\"\ndns = \"corral\"",
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    assert_eq!(
        cfg.profiles.iter().next().unwrap().dns,
        crate::DnsPolicy::Corral
    );
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"internet\"\ndns = \"corral\"",
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    assert_eq!(
        cfg.profiles.iter().next().unwrap().dns,
        crate::DnsPolicy::Corral
    );
    let text = prof(
        "a",
        "br-a",
        "10.0.0.0/24",
        "mode = \"allowlist\"\nallow = [\"pypi.org\"]\ndns = \"corral\"",
    );
    let cfg = Config::from_toml_str(&text, "corral.toml").unwrap();
    let p = cfg.profiles.iter().next().unwrap();
    assert_eq!(p.dns, crate::DnsPolicy::Corral);
    // Written back as read.
    assert!(cfg.to_toml_string().contains("dns = \"corral\""));
}
