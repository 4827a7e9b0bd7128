//! multipass-remote: the same argvs, run on a Linux executor over SSH.
//!
//! `ssh` joins everything after the destination into one string that the
//! executor account's login shell parses again, and login shells disagree
//! about quoting (fish reads `\'` inside single quotes as a quote, so
//! POSIX-quoted data could end a quote there and run a command). So no
//! login shell ever parses user data: corral sends a fixed
//! [`REMOTE_WRAPPER`] that starts `/bin/sh`, and the POSIX-quoted command
//! travels as its argument in base64, whose alphabet no shell treats
//! specially. Only `/bin/sh` decodes and parses it.

use std::fmt;

use async_trait::async_trait;
use base64::Engine as _;
use corral_provider_support::check_argv;

use crate::runner::{Invocation, ProcessRunner, RunError, RunOutput, Runner};

/// Why an SSH target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SSH target `{target}` is invalid: {reason}; expected `host` or `user@host`")]
pub struct SshTargetError {
    /// The refused target.
    pub target: String,
    /// What is wrong with it.
    pub reason: String,
}

/// An SSH destination (`host` or `user@host`, or an alias from
/// `~/.ssh/config`) that `ssh` cannot mistake for an option.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshTarget(String);

impl SshTarget {
    /// Validate `target`.
    pub fn new(target: impl Into<String>) -> Result<Self, SshTargetError> {
        let target = target.into();
        let fail = |reason: &str| SshTargetError {
            target: target.clone(),
            reason: reason.to_owned(),
        };
        if target.is_empty() || target.len() > 255 {
            return Err(fail("it must be 1 to 255 characters"));
        }
        let (user, host) = match target.split_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, target.as_str()),
        };
        let part_ok = |s: &str, extra: &[char]| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(&c))
        };
        if let Some(user) = user
            && !part_ok(user, &[])
        {
            return Err(fail(
                "the user must be [A-Za-z0-9._-] and must not start with `-`",
            ));
        }
        // `:` admits bare IPv6 addresses; `@` may appear only once.
        if !part_ok(host, &[':']) {
            return Err(fail(
                "the host must be [A-Za-z0-9._:-] and must not start with `-`",
            ));
        }
        Ok(Self(target))
    }

    /// The target as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Quote `arg` for a POSIX shell (`shlex`'s quoting: plain words stay as
/// they are). `None` for an argument holding a NUL byte, which no shell
/// word can carry.
pub fn quote(arg: &str) -> Option<String> {
    shlex::try_quote(arg).ok().map(std::borrow::Cow::into_owned)
}

/// The fixed words every login shell sees: `/bin/sh` decodes its `$0`
/// (base64) and evaluates it. It holds no backslash, no single quote
/// inside its quotes and no `!`, so sh, bash, zsh, fish and csh all read
/// it the same way.
pub const REMOTE_WRAPPER: [&str; 3] =
    ["/bin/sh", "-c", r#"'eval "$(printf %s "$0" | base64 -d)"'"#];

/// The words after `ssh … --` that run `argv` on the executor: the wrapper
/// and the POSIX-quoted command line in base64.
pub fn remote_command(argv: &[String]) -> Result<Vec<String>, RunError> {
    check_argv(argv)?;
    let mut line = Vec::with_capacity(argv.len());
    for (index, a) in argv.iter().enumerate() {
        line.push(quote(a).ok_or_else(|| RunError::NulByte {
            program: argv[0].clone(),
            index,
        })?);
    }
    let payload = base64::engine::general_purpose::STANDARD.encode(line.join(" "));
    Ok(REMOTE_WRAPPER
        .iter()
        .map(|w| (*w).to_owned())
        .chain(std::iter::once(payload))
        .collect())
}

/// Runs argvs on an executor through `ssh <options> <target> -- <wrapper>
/// <base64 command>`.
#[derive(Debug, Clone)]
pub struct SshRunner {
    target: SshTarget,
    ssh_program: String,
    local: ProcessRunner,
}

impl SshRunner {
    /// A runner for `target`, using `ssh` from `PATH`.
    pub fn new(target: SshTarget) -> Self {
        Self::with_local(target, ProcessRunner::new())
    }

    /// A runner for `target` that starts `ssh` through `local` (tests give a
    /// runner whose `PATH` leads to a fake `ssh`).
    pub fn with_local(target: SshTarget, local: ProcessRunner) -> Self {
        Self {
            target,
            ssh_program: "ssh".to_owned(),
            local,
        }
    }

    /// The executor.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The local argv that runs `remote` on the executor.
    pub fn wrap(&self, remote: &[String]) -> Result<Vec<String>, RunError> {
        // BatchMode: never stop at a password or host-key prompt; fail instead.
        let mut argv = vec![
            self.ssh_program.clone(),
            "-o".to_owned(),
            "BatchMode=yes".to_owned(),
            self.target.as_str().to_owned(),
            "--".to_owned(),
        ];
        argv.extend(remote_command(remote)?);
        Ok(argv)
    }
}

/// `ssh` exits 255 when it cannot connect or authenticate.
pub const SSH_FAILURE_EXIT: i32 = 255;

#[async_trait]
impl Runner for SshRunner {
    async fn run(&self, invocation: &Invocation) -> Result<RunOutput, RunError> {
        let wrapped = Invocation {
            argv: self.wrap(&invocation.argv)?,
            stdin: invocation.stdin.clone(),
            timeout: invocation.timeout,
        };
        self.local.run(&wrapped).await
    }

    fn location(&self) -> String {
        format!("ssh:{}", self.target)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What a POSIX shell makes of `words` joined by spaces, as ssh does.
    fn shell_split(words: &[String]) -> Vec<String> {
        let script = format!(
            "for a in {}; do printf '%s\\0' \"$a\"; done",
            words.join(" ")
        );
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut words: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect();
        // Every word ends with a NUL, so the split leaves one empty tail.
        words.pop();
        words
    }

    const HOSTILE: &[&str] = &[
        "plain",
        "two words",
        "it's",
        "\"double\"",
        "$(touch /tmp/corral-pwned)",
        "`id`",
        "a; rm -rf /",
        "line\nbreak",
        "",
        "*",
        "~",
        "$HOME",
        "a=b",
        "\\",
        "'",
        "''",
        "-rf",
        "x|y&z>w<v",
        "ünïcødé",
    ];

    #[test]
    fn hostile_arguments_survive_a_real_shell() {
        let args: Vec<String> = HOSTILE.iter().map(|s| (*s).to_owned()).collect();
        let quoted: Vec<String> = args.iter().map(|a| quote(a).unwrap()).collect();
        assert_eq!(shell_split(&quoted), args);
        assert!(!std::path::Path::new("/tmp/corral-pwned").exists());
    }

    #[test]
    fn golden_wrap() {
        let runner = SshRunner::new(SshTarget::new("ops@exec-1").unwrap());
        let argv = runner
            .wrap(&[
                "multipass".into(),
                "exec".into(),
                "corral-a".into(),
                "--".into(),
                "echo".into(),
                "it's $(x)".into(),
            ])
            .unwrap();
        assert_eq!(
            argv[..8],
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "ops@exec-1",
                "--",
                "/bin/sh",
                "-c",
                r#"'eval "$(printf %s "$0" | base64 -d)"'"#,
            ]
        );
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&argv[8])
            .unwrap();
        assert_eq!(
            String::from_utf8(decoded).unwrap(),
            r#"multipass exec corral-a -- echo "it's "'$(x)'"#
        );
        assert!(
            argv[8]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c))
        );
    }

    #[test]
    fn targets() {
        for ok in [
            "exec-1",
            "ops@exec-1.example.net",
            "10.0.0.5",
            "u@fd00::5",
            "alias_2",
        ] {
            assert!(SshTarget::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-oProxyCommand=x",
            "u@-x",
            "-u@x",
            "a b",
            "a;b",
            "a@b@c",
            "$(x)",
            "h\n",
        ] {
            let err = SshTarget::new(bad);
            assert!(err.is_err(), "{bad:?} was accepted");
        }
    }

    /// What `login_shell -c "<words joined>"` runs, as sshd does it.
    fn through_login_shell(login_shell: &str, argv: &[String]) -> Vec<String> {
        let mut remote = vec!["printf".to_owned(), "%s\\0".to_owned()];
        remote.extend(argv.iter().cloned());
        let words = remote_command(&remote).unwrap();
        let out = std::process::Command::new(login_shell)
            .arg("-c")
            .arg(words.join(" "))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{login_shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut words: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect();
        words.pop();
        words
    }

    #[test]
    fn no_login_shell_parses_user_data() {
        let mut shells = vec!["/bin/sh"];
        if corral_test_support::gate::tool("fish", "fish") {
            shells.push("fish");
        }
        let marker = std::env::temp_dir().join(format!("corral-fish-{}", std::process::id()));
        let mut args: Vec<String> = HOSTILE.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("\\'; touch {} #", marker.display()));
        for shell in shells {
            assert_eq!(through_login_shell(shell, &args), args, "{shell}");
            assert!(!marker.exists(), "{shell} ran an injected command");
        }
    }

    proptest! {
        #[test]
        fn quoting_round_trips(args in proptest::collection::vec("[^\\x00]{0,12}", 1..6)) {
            let quoted: Vec<String> = args.iter().map(|a| quote(a).unwrap()).collect();
            prop_assert_eq!(shell_split(&quoted), args);
        }
    }
}
