//! A template as what reaches the guest: the agent-context file's text
//! (corral's words about the sandbox — isolated, disposable,
//! credential-free, and what its network profile allows — then the
//! template's own) and cloud-init user-data, built as typed values and
//! written by a YAML library, never by string pasting.

use corral_sandbox_core::Profile;
use corral_sandbox_core::profile::EgressMode;
use serde::Serialize;

use super::Template;

/// What a template became for one sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rendered {
    /// The template's name.
    pub template: String,
    /// The user cloud-init creates.
    pub user: String,
    /// Where the context file goes.
    pub context_path: String,
    /// The context file's text.
    pub context: String,
    /// The `#cloud-config` user-data.
    pub user_data: String,
    /// What only cloud-init applies (the user, packages, install
    /// commands), in words: reported as not applied on an image without it.
    pub cloud_init_only: Vec<String>,
}

/// The user-data could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the cloud-init user-data of template `{template}`")]
pub struct RenderError {
    /// The template.
    pub template: String,
    /// The cause.
    #[source]
    pub source: yaml_serde::Error,
}

#[derive(Debug, Serialize)]
struct CloudConfig<'a> {
    users: Vec<User<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    package_update: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    packages: &'a [String],
    write_files: Vec<WriteFile<'a>>,
    runcmd: Vec<Vec<&'a str>>,
}

#[derive(Debug, Serialize)]
struct User<'a> {
    name: &'a str,
    gecos: &'static str,
    shell: &'static str,
    // The agent is root in its sandbox anyway (the threat model assumes
    // it); the sandbox, not the guest's accounts, is the boundary.
    sudo: &'static str,
    lock_passwd: bool,
}

#[derive(Debug, Serialize)]
struct WriteFile<'a> {
    path: &'a str,
    owner: String,
    permissions: &'static str,
    // After the user exists (cloud-init's final stage).
    defer: bool,
    content: &'a str,
}

/// One line on what the sandbox's network allows.
pub fn network_summary(profile: Option<&Profile>) -> String {
    let Some(p) = profile else {
        return "It has no network at all: no interface, no address.".to_owned();
    };
    let v6 = if p.subnet_v6.is_some() {
        ""
    } else {
        ", and no IPv6"
    };
    match p.mode {
        EgressMode::None => format!(
            "Its network profile is `{}`: nothing leaves it — no internet, no LAN, not the host, not other sandboxes; it only gets its own address from the gateway.",
            p.name
        ),
        EgressMode::Internet => format!(
            "Its network profile is `{}`: the public internet only — not the LAN, not the host, not other sandboxes, not cloud metadata{v6}.",
            p.name
        ),
        EgressMode::Allowlist => {
            let list: Vec<String> = p.allow.iter().map(ToString::to_string).collect();
            let dns = if p.dns.resolves() {
                " Names resolve through the gateway, which answers for those names only."
            } else {
                ""
            };
            format!(
                "Its network profile is `{}`: it reaches only {}; everything else is blocked{v6}.{dns}",
                p.name,
                list.join(", ")
            )
        }
    }
}

/// The agent-context file for a sandbox from `t` on `profile`.
pub fn context_text(t: &Template, profile: Option<&Profile>) -> String {
    let mut text = format!(
        "# Where you are running\n\
         \n\
         This machine is a corral sandbox, made for one task.\n\
         \n\
         - Isolated. {network} corral enforces this in the host's kernel, \
         outside this sandbox: nothing done in here changes it.\n\
         - Disposable. It may be deleted or replaced at any time. Keep \
         nothing here you need later: hand your work back the way the \
         person you work for asked.\n\
         - Credential-free. corral put no credentials in here and never \
         will: no tokens, no keys, no logins. If a tool needs one, ask the \
         person you work for; do not search this machine or the network \
         for one.\n\
         \n\
         Template `{template}`; you work as the user `{user}`.\n",
        network = network_summary(profile),
        template = t.name,
        user = t.user,
    );
    let extra = t.context.text.trim();
    if !extra.is_empty() {
        text.push('\n');
        text.push_str(extra);
        text.push('\n');
    }
    text
}

/// Render `t` for a sandbox on `profile` (`None`: no network).
pub fn render(t: &Template, profile: Option<&Profile>) -> Result<Rendered, RenderError> {
    let context = context_text(t, profile);
    let home = format!("/home/{}", t.user);
    let chown = format!("{}:{}", t.user, t.user);
    let mut runcmd: Vec<Vec<&str>> = Vec::new();
    // cloud-init makes a written file's missing directories as root; the
    // agent must own its home.
    if t.context.path.starts_with(&format!("{home}/")) {
        runcmd.push(vec!["chown", "-R", &chown, &home]);
    }
    for cmd in &t.install {
        runcmd.push(vec!["sh", "-c", cmd]);
    }
    let doc = CloudConfig {
        users: vec![User {
            name: &t.user,
            gecos: "corral sandbox agent",
            shell: "/bin/bash",
            sudo: "ALL=(ALL) NOPASSWD:ALL",
            lock_passwd: true,
        }],
        package_update: !t.packages.is_empty(),
        packages: &t.packages,
        write_files: vec![WriteFile {
            path: &t.context.path,
            owner: chown.clone(),
            permissions: "0644",
            defer: true,
            content: &context,
        }],
        runcmd,
    };
    let body = yaml_serde::to_string(&doc).map_err(|source| RenderError {
        template: t.name.clone(),
        source,
    })?;
    let mut cloud_init_only = vec![format!("user `{}`", t.user)];
    if !t.packages.is_empty() {
        cloud_init_only.push(format!("packages {}", t.packages.join(", ")));
    }
    if !t.install.is_empty() {
        cloud_init_only.push(format!(
            "{} install command{}",
            t.install.len(),
            if t.install.len() == 1 { "" } else { "s" }
        ));
    }
    Ok(Rendered {
        template: t.name.clone(),
        user: t.user.clone(),
        context_path: t.context.path.clone(),
        context,
        user_data: format!("#cloud-config\n{body}"),
        cloud_init_only,
    })
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::config::Config;
    use yaml_serde::Value;

    use super::super::{Catalog, secrets};
    use super::*;

    fn parsed(r: &Rendered) -> Value {
        assert!(
            r.user_data.starts_with("#cloud-config\n"),
            "{}",
            r.user_data
        );
        yaml_serde::from_str(&r.user_data).unwrap()
    }

    #[test]
    fn user_data_reads_back_as_what_the_template_says() {
        let config = Config::builtin_default();
        let t = Catalog::builtin().unwrap().get("claude").unwrap().clone();
        let profile = config.profiles.get("allowlist");
        let r = render(&t, profile).unwrap();
        let doc = parsed(&r);
        assert_eq!(doc["users"][0]["name"], "agent");
        assert_eq!(doc["users"][0]["lock_passwd"], true);
        assert_eq!(doc["package_update"], true);
        assert_eq!(doc["packages"][3], "nodejs");
        let file = &doc["write_files"][0];
        assert_eq!(file["path"], "/home/agent/.claude/CLAUDE.md");
        assert_eq!(file["owner"], "agent:agent");
        assert_eq!(file["defer"], true);
        // The YAML library carries the text through exactly.
        assert_eq!(file["content"].as_str(), Some(r.context.as_str()));
        assert_eq!(doc["runcmd"][0][0], "chown");
        assert_eq!(
            doc["runcmd"][1],
            Value::Sequence(vec![
                "sh".into(),
                "-c".into(),
                "npm install --global @anthropic-ai/claude-code".into()
            ])
        );
        assert_eq!(r.cloud_init_only.len(), 3, "{:?}", r.cloud_init_only);
    }

    #[test]
    fn the_context_says_isolated_disposable_credential_free_and_which_profile() {
        let config = Config::builtin_default();
        let t = Catalog::builtin().unwrap().get("blank").unwrap().clone();
        for name in ["isolated", "internet", "allowlist"] {
            let p = config.profiles.get(name).unwrap();
            let text = context_text(&t, Some(p));
            for word in ["Isolated.", "Disposable.", "Credential-free.", "`agent`"] {
                assert!(text.contains(word), "{word}: {text}");
            }
            assert!(
                text.contains(&format!("network profile is `{name}`")),
                "{text}"
            );
        }
        let allow = config.profiles.get("allowlist").unwrap();
        let first = allow.allow[0].to_string();
        assert!(context_text(&t, Some(allow)).contains(&first));
        assert!(context_text(&t, None).contains("no network at all"));
    }

    /// corral stores and injects no credentials: no template, as a file or
    /// as what reaches the guest, carries a secret, a token, a key or an
    /// agent login, and the user-data sets no password and no SSH key.
    #[test]
    fn no_template_carries_a_credential() {
        let config = Config::builtin_default();
        for (name, file) in super::super::BUILTIN {
            assert!(
                secrets::findings(file).is_empty(),
                "templates/{name}.toml: {:?}",
                secrets::findings(file)
            );
            let t = Catalog::builtin().unwrap().get(name).unwrap().clone();
            for profile in config.profiles.iter().map(Some).chain([None]) {
                let r = render(&t, profile).unwrap();
                for text in [&r.user_data, &r.context] {
                    assert!(
                        secrets::findings(text).is_empty(),
                        "{name}: {:?}",
                        secrets::findings(text)
                    );
                }
                let doc = parsed(&r);
                let keys: Vec<String> = doc
                    .as_mapping()
                    .unwrap()
                    .keys()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect();
                for forbidden in [
                    "ssh_authorized_keys",
                    "chpasswd",
                    "password",
                    "ssh_keys",
                    "ca_certs",
                ] {
                    assert!(!keys.iter().any(|k| k == forbidden), "{name}: {forbidden}");
                }
                let user = doc["users"][0].as_mapping().unwrap();
                for k in user.keys() {
                    let k = k.as_str().unwrap();
                    assert!(
                        !k.contains("passwd") || k == "lock_passwd",
                        "{name}: user key {k}"
                    );
                    assert!(!k.contains("ssh"), "{name}: user key {k}");
                }
            }
        }
    }
}
