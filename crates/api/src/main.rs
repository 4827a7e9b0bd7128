//! `corrald`: corral's HTTP API (see the `corral_api` library docs for the
//! routes). Configuration, the sandbox provider and the store (events,
//! verification gate) are settled once at start-up, and the watchdog
//! re-verifies running profiled sandboxes every `reverify_interval_secs`; a bad file or a provider the platform
//! matrix refuses stops the server with exit code 2, like `corral`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use corral_api::serve::DEFAULT_SOCKET;
use corral_api::{AppState, Backend, Listen, Settings, serve};
use corral_sandbox_core::SandboxKind;
use corral_service::Store;
use corral_service::config::{ConfigSource, load};
use tracing_subscriber::EnvFilter;

/// corrald: corral's HTTP API (sandboxes, profiles, matrix, host plan/status/verify, verification gate).
#[derive(Debug, Parser)]
#[command(name = "corrald", version)]
struct Args {
    /// Listen on this loopback address instead of the unix socket.
    #[arg(long, value_name = "ADDR", conflicts_with = "socket")]
    listen: Option<SocketAddr>,
    /// The unix socket to listen on (mode 0660; missing directories are created 0750).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The sandbox provider (checked against the platform matrix at start-up).
    #[arg(long, value_name = "KIND", default_value = "incus")]
    provider: SandboxKind,
    /// The local Incus daemon's socket.
    #[arg(long, value_name = "PATH", default_value = corral_provider_incus::client::DEFAULT_SOCKET)]
    incus_socket: PathBuf,
    /// corral.toml (default /etc/corral/corral.toml, else built-in profiles).
    #[arg(long, value_name = "FILE", conflicts_with = "networks_conf")]
    config: Option<PathBuf>,
    /// A legacy networks.conf instead.
    #[arg(long, value_name = "FILE")]
    networks_conf: Option<PathBuf>,
    /// Act inside this network namespace (name under /run/netns, or a path).
    #[arg(long, value_name = "NAME|PATH")]
    netns: Option<String>,
    /// Where applied inputs and the store (events, verification gate) live (default: the config's state_dir).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Re-verify running profiled sandboxes this often instead of
    /// host.verification.reverify_interval_secs (for drills and tests: the
    /// configuration's 60 s minimum does not apply; at least 1).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    reverify_interval_secs: Option<u64>,
}

fn print_error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal: a journal or a log file gets
    // plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
    // Refused before anything is loaded or written: a usage error.
    if let Some(Err(e)) = args.listen.map(serve::check_loopback) {
        print_error(&e);
        return ExitCode::from(2);
    }
    let loaded = match load(&ConfigSource {
        config: args.config.clone(),
        networks_conf: args.networks_conf.clone(),
    }) {
        Ok(loaded) => loaded,
        Err(e) => {
            let usage = e.is_usage();
            print_error(&anyhow::Error::new(e));
            return ExitCode::from(if usage { 2 } else { 1 });
        }
    };
    let backend = match Backend::select(
        std::env::consts::OS,
        args.provider,
        &loaded.config.host,
        args.incus_socket,
    ) {
        Ok(b) => b,
        Err(e) => {
            print_error(&anyhow::Error::new(e));
            return ExitCode::from(2);
        }
    };
    // The same state-directory rule as the CLI's, `--netns` included.
    let settings = Settings::new(loaded, args.netns, args.state_dir.as_deref());
    let store = match Store::open(&settings.state_dir) {
        Ok(s) => s,
        Err(e) => {
            print_error(&anyhow::Error::new(e).context("cannot open corral's store"));
            return ExitCode::from(1);
        }
    };
    let interval = args.reverify_interval_secs.map_or(
        settings.config.host.verification.options.reverify_interval,
        std::time::Duration::from_secs,
    );
    let state = AppState::new(settings, backend, store);
    let listen = match args.listen {
        Some(addr) => Listen::Tcp(addr),
        None => Listen::Unix(args.socket),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            print_error(&anyhow::Error::new(e).context("cannot start the async runtime"));
            return ExitCode::from(1);
        }
    };
    let watchdog = state.watchdog(interval);
    tracing::info!(
        interval_secs = interval.as_secs(),
        "watchdog: re-verifying running profiled sandboxes"
    );
    let result = runtime.block_on(async move {
        // The watchdog lives as long as the server.
        let _watchdog = tokio::spawn(watchdog.run());
        serve(state, listen, |addr| {
            // The one line on stdout: scripts wait for it and read the address.
            println!("corrald {} listening on {addr}", env!("CARGO_PKG_VERSION"));
        })
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(&e);
            ExitCode::from(1)
        }
    }
}
