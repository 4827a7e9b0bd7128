//! Create an Incus sandbox, run one command in it, print the output, and
//! delete it — through the `SandboxProvider` trait, as any embedder would.
//!
//! ```text
//! incus_sandbox [--socket PATH] [--image ALIAS] [--profile NAME [--config FILE]] [-- CMD ARG…]
//! cargo run -p corral-examples --bin incus_sandbox -- -- uname -a
//! ```
//!
//! - `--socket`: the daemon's unix socket (default `/var/lib/incus/unix.socket`).
//! - `--image`: an image alias in corral's Incus project (default
//!   `corral-test`, the busybox image `scripts/incus-image.sh` imports).
//! - `--profile`: attach the sandbox's one NIC to that profile's bridge
//!   (from `--config FILE` or the built-in profiles). The bridge must exist
//!   already: run `corral host apply` first. Without `--profile` the
//!   sandbox has no network at all.
//!
//! The sandbox is deleted even when the command fails. Exit status: the
//! command's own, or 1 when corral could not run it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use corral_provider_incus::client::DEFAULT_SOCKET;
use corral_provider_incus::{Endpoint, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::sandbox::{ExecRequest, NetworkAttachment, SandboxProvider, SandboxSpec};
use corral_sandbox_core::{Config, SandboxName};

#[derive(Debug)]
struct Args {
    socket: PathBuf,
    image: String,
    profile: Option<String>,
    config: Option<String>,
    command: Vec<String>,
}

fn parse(mut it: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut args = Args {
        socket: PathBuf::from(DEFAULT_SOCKET),
        image: TEST_IMAGE_ALIAS.to_owned(),
        profile: None,
        config: None,
        command: Vec::new(),
    };
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().with_context(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--socket" => args.socket = PathBuf::from(value("--socket")?),
            "--image" => args.image = value("--image")?,
            "--profile" => args.profile = Some(value("--profile")?),
            "--config" => args.config = Some(value("--config")?),
            "--" => {
                args.command = it.collect();
                break;
            }
            other => bail!("unknown argument `{other}`; see the usage in the source"),
        }
    }
    if args.command.is_empty() {
        args.command = vec!["uname".into(), "-a".into()];
    }
    Ok(args)
}

fn attachment(args: &Args) -> anyhow::Result<Option<NetworkAttachment>> {
    let Some(name) = &args.profile else {
        return Ok(None);
    };
    let config = match &args.config {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
            Config::from_toml_str(&text, path).map_err(|e| anyhow::anyhow!("{e}"))?
        }
        None => Config::builtin_default(),
    };
    let profile = config.profiles.get(name).with_context(|| {
        format!(
            "profile `{name}` is not configured; configured: {}",
            config.profiles.names().join(", ")
        )
    })?;
    // Providers never resolve names; a provider-side filter (Tart) would
    // get the resolved allowlist here. Incus relies on the host's rules.
    Ok(Some(NetworkAttachment::for_profile(profile, Vec::new())))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("incus_sandbox: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<i32> {
    let args = parse(std::env::args().skip(1))?;
    if !args.socket.exists() {
        bail!(
            "no Incus daemon socket at {}; start incusd (scripts/incus-setup.sh installs and starts one) or pass --socket",
            args.socket.display()
        );
    }
    let mut config = IncusConfig::local();
    config.endpoint = Endpoint::Unix(args.socket.clone());
    // Connecting also creates or converges corral's Incus project.
    let provider = IncusProvider::connect(config)
        .await
        .with_context(|| format!("cannot use the Incus daemon at {}", args.socket.display()))?;

    let name = SandboxName::new(format!("example-{}", std::process::id()))?;
    let mut spec = SandboxSpec::new(name.clone(), args.image.clone());
    spec.network = attachment(&args)?;

    let sandbox = provider.create(&spec).await.context("create")?;
    // From here on, delete the sandbox whatever happens.
    let outcome = async {
        sandbox.start().await.context("start")?;
        let out = sandbox
            .exec(&ExecRequest::new(args.command.clone()))
            .await
            .context("exec")?;
        print!("{}", out.stdout_text());
        eprint!("{}", out.stderr_text());
        anyhow::Ok(out.exit_code)
    }
    .await;
    let deleted = sandbox.delete().await.context("delete");
    let code = outcome?;
    deleted?;
    eprintln!(
        "incus_sandbox: `{name}` created, ran {:?}, deleted",
        args.command
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> anyhow::Result<Args> {
        parse(words.iter().map(|w| (*w).to_owned()))
    }

    #[test]
    fn the_command_after_the_separator_is_kept_intact() {
        let a = args(&["--image", "img", "--", "sh", "-c", "echo 'a b'"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.image, "img");
        assert_eq!(a.command, ["sh", "-c", "echo 'a b'"]);
    }

    #[test]
    fn unknown_flags_and_missing_values_are_refused() {
        assert!(args(&["--bogus"]).is_err());
        assert!(args(&["--socket"]).is_err());
    }

    #[test]
    fn an_unknown_profile_lists_the_configured_ones() {
        let a = args(&["--profile", "nope"]).unwrap_or_else(|e| panic!("{e}"));
        let err = attachment(&a)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("isolated, internet, allowlist"), "{err}");
    }
}
