//! `corrald`: corral's HTTP API (see the `corral_api` library docs for the
//! routes). Configuration is loaded once at start-up; a bad file stops the
//! server with exit code 2, like `corral`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use corral_api::{AppState, Listen, Settings, load, serve};
use tracing_subscriber::EnvFilter;

/// corrald: corral's HTTP API (health, matrix, profiles, host plan/status/verify).
#[derive(Debug, Parser)]
#[command(name = "corrald", version)]
struct Args {
    /// Loopback address to listen on.
    #[arg(long, default_value = "127.0.0.1:7979", conflicts_with = "socket")]
    listen: SocketAddr,
    /// Listen on this unix socket instead.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// corral.toml (default /etc/corral/corral.toml, else built-in profiles).
    #[arg(long, value_name = "FILE", conflicts_with = "networks_conf")]
    config: Option<PathBuf>,
    /// A legacy networks.conf instead.
    #[arg(long, value_name = "FILE")]
    networks_conf: Option<PathBuf>,
    /// Act inside this network namespace (name under /run/netns, or a path).
    #[arg(long, value_name = "NAME|PATH")]
    netns: Option<String>,
    /// Where applied inputs are recorded (default: the config's state_dir).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
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
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let (config, source) = match load::load(args.config.as_deref(), args.networks_conf.as_deref()) {
        Ok(loaded) => loaded,
        Err(e) => {
            print_error(&e);
            return ExitCode::from(2);
        }
    };
    let state = AppState::new(Settings {
        config,
        source,
        netns: args.netns,
        state_dir: args.state_dir,
    });
    let listen = match args.socket {
        Some(path) => Listen::Unix(path),
        None => Listen::Tcp(args.listen),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            print_error(&anyhow::Error::new(e).context("cannot start the async runtime"));
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(serve(state, listen, |addr| {
        // The one line on stdout: scripts wait for it and read the address.
        println!("corrald {} listening on {addr}", env!("CARGO_PKG_VERSION"));
    }));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(&e);
            ExitCode::from(1)
        }
    }
}
