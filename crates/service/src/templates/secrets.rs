//! What a credential looks like, so no template carries one: private and
//! SSH keys, API tokens by their published prefixes, assignments to
//! variables named like credentials, and the commands and files agents and
//! tools log in with. A finding names the kind and at most the token's
//! prefix — never the secret itself, which would put it in a log.

/// Token prefixes services publish for their credentials, and the fewest
/// token characters that follow one.
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("sk-ant-", 16),
    ("sk-proj-", 16),
    ("sk-", 20),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("npm_", 30),
    ("AKIA", 16),
    ("ASIA", 16),
    ("AIza", 30),
    ("hf_", 30),
];

/// Words that make a variable a credential when something is assigned to
/// it (compared case-insensitively).
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "secret",
    "passw",
    "api_key",
    "apikey",
    "api-key",
    "access_key",
    "private_key",
    "credential",
    "oauth",
    "auth_token",
    "authkey",
];

/// Commands, files and headers agents and tools log in with (compared
/// case-insensitively).
const LOGINS: &[(&str, &str)] = &[
    ("claude login", "an agent login command"),
    ("claude setup-token", "an agent login command"),
    ("codex login", "an agent login command"),
    ("gh auth login", "a login command"),
    ("docker login", "a login command"),
    ("npm login", "a login command"),
    ("npm adduser", "a login command"),
    (".credentials.json", "an agent's login file"),
    ("auth.json", "an agent's login file"),
    (".git-credentials", "a stored git login"),
    ("credential.helper", "a stored git login"),
    (".netrc", "a stored login file"),
    ("_authtoken", "a package registry token"),
    ("authorization:", "an HTTP credential header"),
];

fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Every kind of credential `text` appears to hold (empty: none).
pub fn findings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY") {
        out.push("a private key".to_owned());
    }
    for kind in ["ssh-rsa AAAA", "ssh-ed25519 AAAA", "ecdsa-sha2-", "sk-ssh-"] {
        if text.contains(kind) {
            out.push(format!(
                "an SSH key (`{}…`)",
                kind.split(' ').next().unwrap_or(kind)
            ));
        }
    }
    for (prefix, min) in TOKEN_PREFIXES {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            let n = rest.chars().take_while(|c| token_char(*c)).count();
            if n >= *min {
                out.push(format!("an API token (`{prefix}…`)"));
                break;
            }
        }
    }
    let lower = text.to_ascii_lowercase();
    for (i, c) in lower.char_indices() {
        if c != '=' && c != ':' {
            continue;
        }
        let before = lower[..i].trim_end_matches(' ');
        let name_len = before
            .chars()
            .rev()
            .take_while(|c| token_char(*c) || *c == '.')
            .count();
        let name = &before[before.len() - name_len..];
        let value = lower[i + 1..].trim_start_matches([' ', '"', '\'']);
        let word: String = value.chars().take_while(|c| token_char(*c)).collect();
        // A switch (`lock_passwd: true`) holds no secret.
        let assigned = value.starts_with(|c: char| !c.is_whitespace() && c != ',')
            && word != "true"
            && word != "false";
        // `key: value` is an assignment only when the key looks like an
        // identifier; in prose a colon follows ordinary words.
        let identifier = c == '=' || name.contains(['_', '-']);
        if assigned
            && identifier
            && !name.is_empty()
            && !name.starts_with("http")
            && CREDENTIAL_WORDS.iter().any(|w| name.contains(w))
        {
            let start = before.len() - name_len;
            out.push(format!(
                "a credential assignment (`{}{c}`)",
                &text[start..before.len()]
            ));
        }
    }
    for (needle, kind) in LOGINS {
        if lower.contains(needle) {
            out.push(format!("{kind} (`{needle}`)"));
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn credentials_are_found_and_never_echoed() {
        let key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        for (text, kind) in [
            (format!("export X={key}"), "API token"),
            ("ANTHROPIC_API_KEY=abc".to_owned(), "credential assignment"),
            ("OPENAI_API_KEY: abc".to_owned(), "credential assignment"),
            (
                "echo CLAUDE_CODE_OAUTH_TOKEN=x >> ~/.profile".to_owned(),
                "credential assignment",
            ),
            ("password = hunter2".to_owned(), "credential assignment"),
            ("api_key: abc".to_owned(), "credential assignment"),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n".to_owned(),
                "private key",
            ),
            (
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA me@x".to_owned(),
                "SSH key",
            ),
            ("claude setup-token".to_owned(), "login"),
            ("cp auth.json ~/.codex/".to_owned(), "login file"),
            ("git config credential.helper store".to_owned(), "git login"),
            ("//registry/:_authToken=abc".to_owned(), "registry token"),
            (
                "curl -H 'Authorization: Bearer abc' x".to_owned(),
                "HTTP credential",
            ),
            ("AKIAIOSFODNN7EXAMPLE".to_owned(), "API token"),
            (format!("ghp_{}", "a".repeat(36)), "API token"),
        ] {
            let f = findings(&text);
            assert!(f.iter().any(|s| s.contains(kind)), "{text}: {f:?}");
            for s in &f {
                assert!(!s.contains("AbCdEf"), "a finding echoes the secret: {s}");
            }
        }
    }

    #[test]
    fn ordinary_text_is_not_a_credential() {
        for text in [
            "npm install --global @anthropic-ai/claude-code",
            "You are not logged in; the task-assessment tool is at /opt",
            "apt-get install -y git nodejs",
            "Claude Code is installed (`claude`). It is not logged in.",
            "https://example.org/path?x=1",
            "tokens, keys and logins are never put here",
            "risk-assessment-of-the-approach-in-detail",
            "corral stores and injects no credentials: a template",
        ] {
            assert!(findings(text).is_empty(), "{text}: {:?}", findings(text));
        }
    }

    proptest! {
        /// Any token with a published prefix is found wherever it sits.
        #[test]
        fn prefixed_tokens_are_found_anywhere(
            before in "[ a-z.,;(]{0,20}",
            body in "[A-Za-z0-9_]{40,60}",
            after in "[ a-z.,;)]{0,20}",
            i in 0usize..TOKEN_PREFIXES.len(),
        ) {
            let (prefix, _) = TOKEN_PREFIXES[i];
            let text = format!("{before} {prefix}{body}{after}");
            prop_assert!(findings(&text).iter().any(|f| f.contains("API token")), "{}", text);
        }
    }
}
