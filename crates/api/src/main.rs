//! `corrald`: corral's HTTP API (see the `corral_api` library docs for the
//! routes). Configuration, the sandbox provider and the store (events,
//! verification gate) are settled once at start-up, the watchdog
//! re-verifies running profiled sandboxes every `reverify_interval_secs`,
//! and the kernel watch heals or cuts drift as the kernel reports it; a bad file or a provider the platform
//! matrix refuses stops the server with exit code 2, like `corral`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;
use corral_api::cluster::ClusterListener;
use corral_api::guard::Token;
use corral_api::serve::{self, DEFAULT_SOCKET};
use corral_api::state::Limits;
use corral_api::{AppState, Backend, Listen, Settings};
use corral_egress::host::StateStore;
use corral_sandbox_core::SandboxKind;
use corral_service::callers::{Grants, GroupGrants, NamedGroup, NoGrants, StoreGrants};
use corral_service::cluster::RemoteAttester;
use corral_service::config::{ConfigSource, load};
use corral_service::host::{ConfigCheck, compare_with_applied};
use corral_service::reconcile::reconcile;
use corral_service::{AccessPolicy, Store, WallClock};
use tracing_subscriber::EnvFilter;

/// corrald: corral's HTTP API (sandboxes, profiles, matrix, host plan/status/verify, verification gate).
#[derive(Debug, Parser)]
#[command(name = "corrald", version)]
struct Args {
    /// Listen on this loopback address instead of the unix socket; needs --token-file.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with = "socket",
        requires = "token_file"
    )]
    listen: Option<SocketAddr>,
    /// The bearer token every TCP request must carry (a file only its owner can read).
    #[arg(long, value_name = "FILE", requires = "listen")]
    token_file: Option<PathBuf>,
    /// The unix socket to listen on (mode 0660; missing directories are created 0750).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Give the socket to this group (its members can connect; their tier decides what they may do).
    #[arg(long, value_name = "GROUP", conflicts_with = "listen")]
    socket_group: Option<String>,
    /// Members of this group are admins (as root is).
    #[arg(long, value_name = "GROUP")]
    admin_group: Option<String>,
    /// Members of this group may create sandboxes and act on their own (the restricted tier).
    #[arg(long, value_name = "GROUP")]
    users_group: Option<String>,
    /// The largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = corral_api::state::DEFAULT_MAX_BODY)]
    max_body: usize,
    /// The largest upload (a backup to import, a file to push), in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = corral_api::state::DEFAULT_MAX_UPLOAD)]
    max_upload: u64,
    /// Keep at most this many bytes of each output stream of a buffered exec.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_EXEC_OUTPUT)]
    exec_output_cap: u64,
    /// Kill an exec that names no timeout (and everything it started) after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    exec_timeout: u64,
    /// The longest timeout an exec may ask for, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 86_400)]
    exec_timeout_max: u64,
    /// Provider operations running at once.
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_operations: usize,
    /// Requests waiting for a turn beyond those; more are answered 429 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 256)]
    queue: usize,
    /// How long a request waits for a turn before it is answered 429, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    queue_wait: u64,
    /// Serve even when the configuration differs from what was applied (health answers 503).
    #[arg(long)]
    allow_config_mismatch: bool,
    /// Print the OpenAPI document (docs/openapi.json) and exit.
    #[arg(long)]
    openapi: bool,
    /// Streamed execs open at once.
    #[arg(long, value_name = "N", default_value_t = 32)]
    max_streams: usize,
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
    /// How long the watchdog lets a running sandbox go without a passing
    /// verdict (a hand-out may be under way) before it verifies it anyway
    /// (default 120; for drills and tests).
    #[arg(long, value_name = "SECS")]
    handout_grace_secs: Option<u64>,
    /// Do not run the kernel watch (which heals or cuts any change to
    /// corral's tables, bridges and ports corral did not make; see
    /// `corral host watch`). For tests that need drift to stay.
    #[arg(long, env = "CORRALD_NO_KERNEL_WATCH")]
    no_kernel_watch: bool,
    /// Do not supervise: neither restart a gateway that died nor judge an
    /// Incus start corral did not make (see `corral host watch`). For tests
    /// that need a dead gateway or an unjudged start to stay as they are.
    #[arg(long, env = "CORRALD_NO_SUPERVISE")]
    no_supervise: bool,
    /// This member's cluster.toml: serve its attestation to the peers it
    /// names over mutually authenticated TLS, and keep the Incus cluster's
    /// rotation (attest every member each interval, drain and restore,
    /// write the standings placement reads; docs/cluster.md).
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
}

/// Default `--exec-output-cap`: 1 MiB per stream.
const DEFAULT_EXEC_OUTPUT: u64 = 1 << 20;

fn print_error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

/// Where and how to listen, from the arguments: TCP with its token, or the
/// socket with its group and the caller policy.
fn listen(args: &Args) -> anyhow::Result<Listen> {
    if let Some(addr) = args.listen {
        let Some(file) = &args.token_file else {
            bail!("--listen needs --token-file: corrald refuses TCP without a token");
        };
        return Ok(Listen::Tcp {
            addr,
            token: Token::read(file)?,
        });
    }
    let group = |name: &Option<String>, flag: &str| -> anyhow::Result<Option<NamedGroup>> {
        name.as_deref()
            .map(|n| NamedGroup::lookup(n).with_context(|| format!("--{flag}")))
            .transpose()
    };
    let admin = group(&args.admin_group, "admin-group")?;
    let grants: Arc<dyn Grants> = match group(&args.users_group, "users-group")? {
        Some(users) => Arc::new(GroupGrants::new(users)),
        None => Arc::new(NoGrants),
    };
    Ok(Listen::Unix {
        path: args.socket.clone(),
        group: group(&args.socket_group, "socket-group")?,
        policy: AccessPolicy::new(admin, grants),
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.openapi {
        print!("{}", corral_api::openapi::json());
        return ExitCode::SUCCESS;
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal: a journal or a log file gets
    // plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
    // Refused before anything is loaded or written: usage errors.
    if let Some(Err(e)) = args.listen.map(serve::check_loopback) {
        print_error(&anyhow::Error::new(e));
        return ExitCode::from(2);
    }
    let listen = match listen(&args) {
        Ok(l) => l,
        Err(e) => {
            print_error(&e);
            return ExitCode::from(2);
        }
    };
    // Cluster membership (docs/cluster.md): checked before anything is
    // loaded or written; the listener starts with the server below. Its
    // settings (`cluster.settings()`) are the ones the rotation runs on.
    let cluster = match args.cluster.as_deref().map(ClusterListener::load) {
        Some(Err(e)) => {
            print_error(&anyhow::Error::new(e).context("--cluster"));
            return ExitCode::from(2);
        }
        Some(Ok(c)) => Some(c),
        None => None,
    };
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
        args.incus_socket.clone(),
    ) {
        Ok(b) => b
            .with_max_exec_output(args.exec_output_cap)
            .with_profiles(&loaded.config.profiles),
        Err(e) => {
            print_error(&anyhow::Error::new(e));
            return ExitCode::from(2);
        }
    };
    // The same state-directory rule as the CLI's, `--netns` included.
    let settings = Settings::new(loaded, args.netns, args.state_dir.as_deref());
    // Serving a configuration the host does not enforce would report "in
    // sync" against the applied record while creating sandboxes for
    // profiles that may not exist: refuse, unless told to go on (and then
    // say so loudly, and in every health answer).
    match compare_with_applied(&settings.config, &StateStore::new(&settings.state_dir)) {
        Ok(check) if check.matches() => tracing::info!("{check}"),
        Ok(check @ ConfigCheck::NothingApplied { .. }) => {
            tracing::warn!("{check}; sandboxes on profiles are refused until then")
        }
        Ok(check) if args.allow_config_mismatch => {
            tracing::error!(
                "{check}; serving anyway (--allow-config-mismatch): the start gate refuses sandboxes on the differing profiles and /v1/health answers 503"
            )
        }
        Ok(check) => {
            print_error(&anyhow::anyhow!(
                "{check}, or start corrald with --allow-config-mismatch to serve anyway"
            ));
            return ExitCode::from(1);
        }
        Err(e) => {
            print_error(&anyhow::Error::new(e).context("cannot read what was applied"));
            return ExitCode::from(1);
        }
    }
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
    // A NIC plugged into a corral bridge by anyone but corral is isolated
    // and quarantined as soon as the kernel reports it.
    let _sweeper = match corral_service::ports::PortSweeper::spawn(
        settings.netns.clone(),
        settings.state_dir.clone(),
    ) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "ports hot-plugged into corral's bridges will be quarantined only by the next apply, refresh or sandbox create");
            None
        }
    };
    let state = AppState::new(settings, backend, store).with_limits(Limits {
        max_body: args.max_body,
        exec_timeout: Duration::from_secs(args.exec_timeout.max(1)),
        exec_timeout_max: Duration::from_secs(args.exec_timeout_max.max(args.exec_timeout)),
        operations: args.max_operations,
        queue: args.queue,
        queue_wait: Duration::from_secs(args.queue_wait),
        streams: args.max_streams,
        max_upload: args.max_upload,
    });
    // The event families count what reaches the audit trail from now on.
    if let Err(e) = state
        .metrics()
        .families()
        .follow(state.db().audit().follow())
    {
        tracing::error!(error = %e, "metrics: not following the audit trail; its families stay at zero");
    }
    // Users `corral grant` named are granted too, read from the store on
    // every request (a revoke holds at once).
    let listen = match listen {
        Listen::Unix {
            path,
            group,
            policy,
        } => Listen::Unix {
            path,
            group,
            policy: policy.also_granting(Arc::new(StoreGrants(state.db_shared()))),
        },
        tcp => tcp,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            print_error(&anyhow::Error::new(e).context("cannot start the async runtime"));
            return ExitCode::from(1);
        }
    };
    // Blocked packets and DNS decisions into the audit trail, attributed
    // through this server's provider (unless another process collects).
    let nics = corral_service::audit::collector::ServiceNics::new(
        state.sandboxes().clone(),
        runtime.handle().clone(),
    );
    let _collector = match corral_service::audit::Collector::try_start(
        &state.settings().state_dir,
        state.settings().netns.as_deref(),
        std::sync::Arc::new(nics),
    ) {
        Ok(Some(c)) => {
            tracing::info!("audit: collecting blocked packets and DNS decisions");
            Some(c)
        }
        Ok(None) => {
            tracing::warn!("audit: another process collects for this state directory");
            None
        }
        Err(e) => {
            tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "audit: not collecting blocked packets or DNS decisions");
            None
        }
    };
    // The rotation asks every member (itself included, at its own
    // listener) over the same mutually authenticated TLS.
    // The same client asks a member's corrald to admit profiled work
    // placed on it (its gate and canary run on its kernel).
    let peers = match cluster
        .as_ref()
        .map(|c| RemoteAttester::new(c.settings(), &state.settings().config))
    {
        None => None,
        Some(Ok(a)) => Some(Arc::new(a)),
        Some(Err(e)) => {
            print_error(&anyhow::Error::new(e).context("--cluster: the rotation's attester"));
            return ExitCode::from(1);
        }
    };
    let state = match &peers {
        Some(a) => state.with_peers(Arc::clone(a)),
        None => state,
    };
    let controller = cluster
        .as_ref()
        .zip(peers)
        .map(|(c, a)| corral_api::rotation::controller(&state, c.settings(), a.clone(), Some(a)));
    let mut watchdog = state.watchdog(interval);
    if let Some(secs) = args.handout_grace_secs {
        watchdog = watchdog.with_handout_grace(std::time::Duration::from_secs(secs));
    }
    // The kernel watch on a thread of its own, for the server's life; a
    // heal nudges the watchdog for the healed profiles' sandboxes.
    let kernel_watch = if args.no_kernel_watch {
        tracing::warn!("kernel watch off (--no-kernel-watch): drift waits for the watchdog");
        None
    } else {
        state.kernel_watch(runtime.handle().clone(), watchdog.handle())
    };
    tracing::info!(
        interval_secs = interval.as_secs(),
        "watchdog: re-verifying running profiled sandboxes"
    );
    let reaper = state.reaper();
    let no_supervise = args.no_supervise;
    let result = runtime.block_on(async move {
        // A corrald killed mid-operation left the database and the backend
        // disagreeing: settle it before serving (or say why not).
        match reconcile(state.sandboxes(), state.db(), &WallClock).await {
            Ok(done) if done.is_empty() => {
                tracing::info!("the database and the backend agree")
            }
            Ok(done) => tracing::warn!(
                adopted = ?done.adopted,
                forgotten = ?done.forgotten,
                released = ?done.released,
                "reconciled the database with the backend (each is an alert in the event log)"
            ),
            Err(e) => tracing::warn!(
                error = %format!("{:#}", anyhow::Error::new(e)),
                "not reconciled; sandboxes the database does not know stay admin-only"
            ),
        }
        // Gateways restarted when they die, starts behind corral's back
        // put through the gate: both for the server's life.
        let supervisors = if no_supervise {
            tracing::warn!("supervision off (--no-supervise): dead gateways stay dead, out-of-band starts are not judged");
            None
        } else {
            Some(supervise(&state).await)
        };
        // The watchdog lives as long as the server.
        let _watchdog = tokio::spawn(watchdog.run());
        // So does the reaper of lifetimes (`corral new --ttl`, `--idle-stop`).
        let _reaper = tokio::spawn(reaper.run());
        // So does the cluster controller, when this is a cluster member.
        let _controller = controller.map(|c| tokio::spawn(c.run()));
        if let Some(cluster) = cluster {
            cluster.start(state.clone()).await?;
        }
        let served = serve::serve(
            state,
            listen,
            |addr| {
                // The one line on stdout: scripts wait for it and read the address.
                println!("corrald {} listening on {addr}", env!("CARGO_PKG_VERSION"));
            },
            serve::stop_signal(),
        )
        .await;
        if let Some((gateways, starts)) = supervisors {
            if let Some(g) = gateways {
                g.stop().await;
            }
            if let Some(s) = starts {
                s.stop().await;
            }
        }
        served
    });
    if let Some(w) = kernel_watch {
        w.stop();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(&anyhow::Error::new(e));
            ExitCode::from(1)
        }
    }
}

/// The gateway supervisor and the Incus start watcher over `state`'s
/// settings, store and backend; each that cannot start is logged and left
/// out (the start gate still refuses while a gateway is down).
async fn supervise(
    state: &AppState,
) -> (
    Option<corral_service::supervise::SupervisorHandle>,
    Option<corral_service::supervise::StartWatchHandle>,
) {
    use corral_service::supervise::{GatewaySupervisor, IncusStartWatcher};
    let settings = state.settings();
    let gateways = match GatewaySupervisor::new(
        &settings.state_dir,
        settings.netns.as_deref(),
        state.db_shared(),
    ) {
        Ok(s) => Some(s.spawn()),
        Err(e) => {
            tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "gateway supervisor: not running");
            None
        }
    };
    let starts = match state.backend().incus_providers().await {
        Ok(Some(providers)) => Some(
            IncusStartWatcher::new(
                std::sync::Arc::new(state.sandboxes().clone()),
                state.db_shared(),
                providers,
            )
            .spawn(),
        ),
        Ok(None) => None,
        Err(e) => {
            tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "start watcher: not running");
            None
        }
    };
    (gateways, starts)
}
