//! The legacy `networks.conf`: one profile per line,
//! `name bridge subnet allowed-hosts`, where allowed-hosts is `-` (no
//! egress), `internet`, or a comma-separated allowlist. `#` starts a comment
//! (at the start of a line or of a column); blank lines are skipped.
//!
//! Unlike the tool this format comes from, a line with more than four
//! columns is refused: the extra text was almost always meant as part of the
//! allowlist, and silently dropping it changes the policy.

use ipnet::Ipv4Net;

use super::errors::{Collector, ConfigErrors};
use super::{Config, PhaseProfiles, defaults};
use crate::names::{BridgeName, ProfileName};
use crate::profile::{
    AllowEntry, BlockAction, DnsPolicy, EgressMode, Profile, ProfileField, ProfileSet,
};

const COLUMNS: [&str; 4] = ["name", "bridge", "subnet", "allowed-hosts"];

/// A token and its 1-based column.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    text: &'a str,
    column: usize,
}

fn tokens(line: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some(&(start, ch)) = chars.peek() {
        if ch.is_whitespace() {
            chars.next();
            continue;
        }
        if ch == '#' {
            break;
        }
        let mut end = line.len();
        while let Some(&(i, c)) = chars.peek() {
            if c.is_whitespace() {
                end = i;
                break;
            }
            chars.next();
        }
        let column = line[..start].chars().count() + 1;
        out.push(Token {
            text: &line[start..end],
            column,
        });
    }
    out
}

pub(crate) fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    let mut c = Collector::new(file, text);
    // (line number, the columns' tokens, the profile) for each good line.
    let mut parsed: Vec<(usize, [Token<'_>; 4], Profile)> = Vec::new();
    let mut bad_lines = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let toks = tokens(line);
        if toks.is_empty() {
            continue;
        }
        if toks.len() > COLUMNS.len() {
            let extra = toks[COLUMNS.len()];
            c.at_line(
                n,
                Some(extra.column),
                Some(&format!("profile \"{}\"", toks[0].text)),
                None,
                format!(
                    "extra column `{}`: a line has exactly 4 columns (name bridge subnet \
                    allowed-hosts); write an allowlist as one comma-separated column without \
                    spaces, or start a comment with #",
                    extra.text
                ),
            );
            bad_lines = true;
            continue;
        }
        if toks.len() < COLUMNS.len() {
            let missing = COLUMNS[toks.len()..].join(" ");
            c.at_line(
                n,
                None,
                Some(&format!("profile \"{}\"", toks[0].text)),
                None,
                format!(
                    "{} of 4 columns; add the missing {missing} (allowed-hosts is `-`, \
                    `internet` or a comma-separated list)",
                    toks.len()
                ),
            );
            bad_lines = true;
            continue;
        }
        let cols = [toks[0], toks[1], toks[2], toks[3]];
        match line_profile(n, &cols, &mut c) {
            Some(p) => parsed.push((n, cols, p)),
            None => bad_lines = true,
        }
    }
    if parsed.is_empty() && !bad_lines {
        c.at(
            None,
            None,
            None,
            "no profiles; add a line `name bridge subnet allowed-hosts`",
        );
        return Err(c.into_errors());
    }
    let host = defaults::host();
    let profiles: Vec<Profile> = parsed.iter().map(|(_, _, p)| p.clone()).collect();
    let set = match ProfileSet::new(profiles) {
        Ok(set) => Some(set),
        Err(errors) => {
            for e in errors.0 {
                let (n, cols, _) = &parsed[e.index];
                let col = match e.field {
                    ProfileField::Name => cols[0].column,
                    ProfileField::Bridge => cols[1].column,
                    ProfileField::Subnet | ProfileField::SubnetV6 => cols[2].column,
                    // networks.conf has no dns column: its profiles never
                    // set one.
                    ProfileField::Mode | ProfileField::Allow | ProfileField::Dns => cols[3].column,
                };
                let field = match e.field {
                    ProfileField::Mode | ProfileField::Allow => "allowed-hosts",
                    other => other.key(),
                };
                let ctx = format!("profile \"{}\"", e.profile);
                c.at_line(*n, Some(col), Some(&ctx), Some(field), e.problem);
            }
            None
        }
    };
    for (n, cols, p) in &parsed {
        if p.bridge == host.multipass_bridge {
            c.at_line(
                *n,
                Some(cols[1].column),
                Some(&format!("profile \"{}\"", p.name)),
                Some("bridge"),
                format!(
                    "bridge \"{}\" is Multipass's control bridge, whose forwarding corral \
                    blocks; choose another bridge name",
                    p.bridge
                ),
            );
        }
    }
    match set {
        Some(profiles) if !bad_lines => c.finish(|| Config {
            host,
            profiles,
            phases: PhaseProfiles::default(),
        }),
        _ => Err(c.into_errors()),
    }
}

fn line_profile(n: usize, cols: &[Token<'_>; 4], c: &mut Collector<'_>) -> Option<Profile> {
    let ctx = format!("profile \"{}\"", cols[0].text);
    let ctx = Some(ctx.as_str());
    let before = c.errors.len();
    let name = ProfileName::new(cols[0].text)
        .map_err(|e| c.at_line(n, Some(cols[0].column), ctx, Some("name"), e.to_string()))
        .ok();
    let bridge = BridgeName::new(cols[1].text)
        .map_err(|e| c.at_line(n, Some(cols[1].column), ctx, Some("bridge"), e.to_string()))
        .ok();
    let subnet = cols[2]
        .text
        .parse::<Ipv4Net>()
        .map_err(|_| {
            c.at_line(
                n,
                Some(cols[2].column),
                ctx,
                Some("subnet"),
                format!(
                    "`{}` is not an IPv4 subnet; write a CIDR such as 10.231.1.0/24",
                    cols[2].text
                ),
            );
        })
        .ok();
    let (mode, allow) = match cols[3].text {
        "-" => (EgressMode::None, Vec::new()),
        "internet" => (EgressMode::Internet, Vec::new()),
        list => {
            let mut allow = Vec::new();
            for item in list.split(',') {
                if item.is_empty() {
                    c.at_line(n, Some(cols[3].column), ctx, Some("allowed-hosts"), format!(
                        "`{list}` has an empty entry; separate entries with single commas and no \
                            trailing comma"
                    ));
                    continue;
                }
                match item.parse::<AllowEntry>() {
                    Ok(e) => allow.push(e),
                    Err(e) => c.at_line(
                        n,
                        Some(cols[3].column),
                        ctx,
                        Some("allowed-hosts"),
                        e.to_string(),
                    ),
                }
            }
            (EgressMode::Allowlist, allow)
        }
    };
    if c.errors.len() != before {
        return None;
    }
    Some(Profile {
        name: name?,
        bridge: bridge?,
        subnet_v4: subnet?,
        subnet_v6: None,
        mode,
        allow,
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
        learned_max: crate::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(text: &str) -> Vec<String> {
        Config::from_networks_conf(text, "networks.conf")
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_reference_example_loads() {
        let text = "# name           bridge          subnet         allowed-hosts\n\
            isolated         cb-iso          10.99.1.0/24   -\n\
            agent            cb-agent        10.99.2.0/24   api.example.com\n\
            \n\
            internet-only    cb-net          10.99.5.0/24   internet   # wide reach\n\
            multi-llm        cb-multi-llm    10.99.4.0/24   api.example.com,api.example.net\n";
        let cfg = Config::from_networks_conf(text, "networks.conf").unwrap();
        let modes: Vec<_> = cfg.profiles.iter().map(|p| p.mode).collect();
        assert_eq!(
            modes,
            [
                EgressMode::None,
                EgressMode::Allowlist,
                EgressMode::Internet,
                EgressMode::Allowlist
            ]
        );
        assert_eq!(cfg.profiles.get("multi-llm").unwrap().allow.len(), 2);
        // The same config, as corral.toml, loads back equal.
        let again = Config::from_toml_str(&cfg.to_toml_string(), "corral.toml").unwrap();
        assert_eq!(again, cfg);
    }

    #[test]
    fn extra_columns_are_refused() {
        assert_eq!(
            errs("dev  br-dev  10.0.0.0/24  a.example.com, b.example.com\n"),
            [
                "networks.conf:1:42: profile \"dev\": extra column `b.example.com`: a \
                    line has exactly 4 columns (name bridge subnet allowed-hosts); write an \
                    allowlist as one comma-separated column without spaces, or start a \
                    comment with #"
            ]
        );
    }

    #[test]
    fn missing_columns_are_refused() {
        assert_eq!(
            errs("\n# c\ndev br-dev 10.0.0.0/24\n"),
            [
                "networks.conf:3: profile \"dev\": 3 of 4 columns; add the missing \
                    allowed-hosts (allowed-hosts is `-`, `internet` or a comma-separated \
                    list)"
            ]
        );
    }

    #[test]
    fn field_errors_have_line_and_column() {
        assert_eq!(
            errs(
                "a  br-a  10.0.1.0/24  -\nb  corral-way-too-long  10.0.2.0/24  x.example.com,,bad_host\n"
            ),
            [
                "networks.conf:2:4: profile \"b\": bridge: bridge name \
                    `corral-way-too-long` is 19 bytes long; the limit is 15 bytes",
                "networks.conf:2:38: profile \"b\": allowed-hosts: \
                    `x.example.com,,bad_host` has an empty entry; separate entries with \
                    single commas and no trailing comma",
                "networks.conf:2:38: profile \"b\": allowed-hosts: allow entry `bad_host` \
                    is invalid: host name `bad_host` is invalid: character '_' is not \
                    allowed; expected a DNS name of dot-separated labels of [A-Za-z0-9-] (1 \
                    to 63 each, no leading or trailing `-`), at most 253 characters",
            ]
        );
    }

    #[test]
    fn set_rules_apply_with_positions() {
        assert_eq!(
            errs(
                "a  br-a  10.0.0.0/16  -\nb  br-a  10.0.3.0/24  internet\nmp mpqemubr0 10.1.0.0/24 -\n"
            ),
            [
                "networks.conf:2:4: profile \"b\": bridge: bridge \"br-a\" is already \
                    used by profile \"a\"; each profile needs its own bridge",
                "networks.conf:2:10: profile \"b\": subnet: 10.0.3.0/24 overlaps \
                    10.0.0.0/16 of profile \"a\"; give each profile a separate subnet",
                "networks.conf:3:4: profile \"mp\": bridge: bridge \"mpqemubr0\" is \
                    Multipass's control bridge, whose forwarding corral blocks; choose \
                    another bridge name",
            ]
        );
    }

    #[test]
    fn empty_file() {
        assert_eq!(
            errs("# nothing\n\n"),
            ["networks.conf: no profiles; add a line `name bridge subnet allowed-hosts`"]
        );
    }
}
