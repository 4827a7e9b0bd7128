//! The kernel's answer for packets from sandboxes: one read-back of
//! `table inet corral`, its drift from the plan, and for each packet the
//! kernel's route and the live rules walked along it
//! ([`crate::nft::live_trace`]). What `corral explain` answers from.

use serde::Serialize;

use super::{Host, HostError};
use crate::drift::{self, Drift};
use crate::link::Links;
use crate::nft::live_trace::{Iface, LiveTrace, Packet, Route, trace_live};
use crate::nft::{self};
use crate::plan::eval::Flow;
use crate::plan::{HostPlan, TableFamily};

/// A packet to walk: its flow and the bridge it arrives on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveAsk {
    /// The profile bridge the sandbox's port is on.
    pub bridge: String,
    /// The flow's first packet.
    pub flow: Flow,
}

/// What the kernel holds and does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveReading {
    /// Every difference between the plan and corral's live tables.
    pub drift: Vec<Drift>,
    /// One per ask, in order: the packet as routed and its walk.
    pub traces: Vec<(Packet, LiveTrace)>,
}

impl Host {
    /// Reads corral's tables back once and walks each ask through them
    /// along the kernel's route (see the module docs).
    pub fn trace_live(&self, plan: &HostPlan, asks: &[LiveAsk]) -> Result<LiveReading, HostError> {
        self.within(|| async {
            let live = nft::read_live_enforcing()?;
            let drift = drift::diff(plan, &live);
            let links = Links::connect()?;
            let table = live.table(TableFamily::Inet);
            let mut traces = Vec::with_capacity(asks.len());
            for ask in asks {
                let f = ask.flow;
                let (iif, route) = match links.get(&ask.bridge).await? {
                    Some(l) => {
                        let route = links.route_of(l.index, f.src, f.dst).await?;
                        (
                            Iface {
                                name: l.name,
                                group: l.group,
                            },
                            route,
                        )
                    }
                    None => (
                        Iface {
                            name: ask.bridge.clone(),
                            group: 0,
                        },
                        Route::Refused(format!(
                            "bridge {} does not exist: no packet arrives on it",
                            ask.bridge
                        )),
                    ),
                };
                let pkt = Packet {
                    protocol: f.protocol,
                    src: f.src,
                    dst: f.dst,
                    dport: f.dport,
                    iif,
                    route,
                };
                let trace = trace_live(table, &pkt);
                traces.push((pkt, trace));
            }
            Ok(LiveReading { drift, traces })
        })
    }
}
