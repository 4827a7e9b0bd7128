//! A [`Resolver`] running on a thread of its own inside a network
//! namespace (its sockets bound there, its learning into that
//! namespace's sets), until the handle is dropped: how corrald's
//! supervisor and the drill's lab host corral's resolver on a bridge.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use corral_egress::netns::Netns;
use tokio::sync::oneshot;

use super::askers::Askers;
use super::audit::{AUDIT_FILE, FileSink};
use super::recorded::Recorded;
use super::serve::{Bounds, NftLearner, Resolver, bind};
use crate::approvals::Approvals;
use crate::files::DHCP_RESERVATIONS_FILE;

/// How often a hosted resolver looks at its record (a `stat`).
const RECORD_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// A resolver serving one bridge; dropping it stops it and closes its
/// sockets.
#[derive(Debug)]
pub struct Hosted {
    resolver: Arc<Resolver>,
    at: Vec<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Hosted {
    /// Binds `resolver` at every address of `at` on `device` inside `ns`
    /// and serves it on a thread of its own. Returns once the sockets are
    /// bound (an error here: nothing runs).
    pub fn start(
        ns: &Netns,
        resolver: Resolver,
        at: &[SocketAddr],
        device: &str,
    ) -> io::Result<Self> {
        let resolver = Arc::new(resolver);
        let ns = ns.try_clone()?;
        let device = device.to_owned();
        let addrs = at.to_vec();
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel::<io::Result<()>>();
        let r = Arc::clone(&resolver);
        let thread = std::thread::Builder::new()
            .name(format!("resolver-{device}"))
            .spawn(move || {
                let served = ns.enter_and_run_async(|| async move {
                    let mut serving = tokio::task::JoinSet::new();
                    for addr in addrs {
                        let (udp, tcp) = match bind(addr, &device) {
                            Ok(s) => s,
                            Err(e) => {
                                let _ = ready.send(Err(io::Error::new(
                                    e.kind(),
                                    format!("binding {addr}: {e}"),
                                )));
                                return;
                            }
                        };
                        serving.spawn(Arc::clone(&r).serve_udp(udp));
                        serving.spawn(Arc::clone(&r).serve_tcp(tcp));
                    }
                    let _ = ready.send(Ok(()));
                    // Until told to stop, until a socket fails (the bridge
                    // gone), or until its record changes: then
                    // `is_serving` turns false and the host starts it
                    // again. A resolver whose record went lets go of the
                    // gateway's port at once, so dnsmasq can take it back.
                    let record = async {
                        let mut every = tokio::time::interval(RECORD_CHECK);
                        loop {
                            every.tick().await;
                            if !r.is_current() {
                                return;
                            }
                        }
                    };
                    tokio::select! {
                        _ = serving.join_next() => {}
                        _ = stopped => {}
                        () = record => {}
                    }
                });
                // A namespace that could not be entered never sent `ready`;
                // the receiver sees the sender dropped.
                drop(served);
            })?;
        match bound.recv() {
            Ok(Ok(())) => Ok(Self {
                resolver,
                at: at.to_vec(),
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(io::Error::other(
                    "the resolver's thread ended before binding (the network namespace could not be entered)",
                ))
            }
        }
    }

    /// Hosts the resolver a record describes on its bridge inside `ns`,
    /// learning into that namespace's sets, serving while the record is
    /// the version read.
    pub fn from_record(ns: &Netns, record: &Recorded, bounds: Bounds) -> Result<Self, String> {
        let spec = record.spec.as_ref().map_err(Clone::clone)?;
        let trail = record.path.with_file_name(AUDIT_FILE);
        let sink =
            FileSink::open(&trail).map_err(|e| format!("cannot open {}: {e}", trail.display()))?;
        let mut resolver = spec
            .resolver(
                Arc::new(NftLearner),
                Askers::recorded(record.path.with_file_name(DHCP_RESERVATIONS_FILE)),
                bounds,
            )?
            .watching(record.path.clone(), record.id)
            .with_audit(Arc::new(sink));
        if let Some(timeout) = spec.profile.approvals.timeout() {
            let dir = record
                .path
                .parent()
                .map(corral_state_files::StateDir::open_existing)
                .and_then(Result::ok)
                .flatten()
                .ok_or_else(|| {
                    format!(
                        "cannot open the gateway directory of {}",
                        record.path.display()
                    )
                })?;
            let approvals = Approvals::open(
                &dir,
                spec.profile.name.as_str(),
                spec.profile.bridge.as_str(),
                timeout,
            )
            .map_err(|e| format!("cannot hold lookups for approval: {e}"))?;
            resolver = resolver.holding(approvals);
        }
        let bridge = spec.profile.bridge.to_string();
        Self::start(ns, resolver, &spec.listen(), &bridge).map_err(|e| {
            format!(
                "corral's resolver for profile `{}` cannot listen on bridge {bridge}: {e}",
                spec.profile.name,
            )
        })
    }

    /// The resolver, for its counters.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// Where it listens.
    pub fn at(&self) -> &[SocketAddr] {
        &self.at
    }

    /// Whether it still serves (its thread has not ended: a socket error
    /// ends it).
    pub fn is_serving(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Hosted {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
