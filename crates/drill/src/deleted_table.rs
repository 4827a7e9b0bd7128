//! The drill's deleted-table row: `table inet corral` deleted under a
//! sandbox, which uses the window to open a TCP connection to a
//! destination its profile refuses and keeps it open; corral's heal (the
//! recorded plan applied again, as the kernel watch does it:
//! docs/security.md, "Watched") must leave that live connection dead.
//!
//! The control is the same connection, probed while the table is still
//! gone: it echoes, so the row's probe can see a live flow, and what ends
//! it is the heal (the flow revoked, or its next packet refused as a
//! mid-stream pickup). The row leaves the lab's plan in force.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use corral_egress::plan::TableFamily;
use corral_egress::plan::eval::{Flow, Judgement, Learned};

use crate::lab::topology::{PUBLIC_V4, SandboxNs, TCP_PORTS};
use crate::lab::{Lab, Observed, tcp};
use crate::report::{DrillRow, Expect, judge};

/// The row's probe label.
pub const DELETED_TABLE: &str = "deleted table under a live flow: a connection opened while `table inet corral` was gone to a destination the profile refuses, after the heal";

/// The first sandbox with a public destination of the lab its profile
/// refuses, and that destination.
fn subject(lab: &Lab) -> Option<(&SandboxNs, SocketAddr)> {
    let learned = Learned::new();
    lab.topo.sandboxes.iter().find_map(|sb| {
        PUBLIC_V4.iter().find_map(|ip| {
            TCP_PORTS.iter().find_map(|port| {
                let flow = Flow {
                    protocol: 6,
                    src: IpAddr::V4(sb.v4),
                    dst: IpAddr::V4(*ip),
                    dport: Some(*port),
                };
                matches!(lab.plan.judge(&flow, &learned), Judgement::Refused { .. })
                    .then(|| (sb, SocketAddr::new(IpAddr::V4(*ip), *port)))
            })
        })
    })
}

/// One byte out, its echo back within `timeout`.
fn echo(conn: &mut TcpStream, timeout: Duration) -> Observed {
    if let Err(e) = conn.set_read_timeout(Some(timeout)) {
        return Observed::Error(format!("read timeout: {e}"));
    }
    let mut b = [0u8; 1];
    match conn.write_all(b"x").and_then(|()| conn.read_exact(&mut b)) {
        Ok(()) => Observed::Connected,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Observed::TimedOut
        }
        Err(e) => Observed::Rejected(e.to_string()),
    }
}

/// The row, or `None` when no profile of the lab refuses a public
/// destination (every profile is `internet`-like: nothing to open).
pub(crate) fn row(lab: &Lab, timeout: Duration) -> Option<DrillRow> {
    let (sb, to) = subject(lab)?;
    let start = Instant::now();
    let (control, observed) = match run(lab, sb, to, timeout) {
        Ok(pair) => pair,
        Err(e) => {
            let e = Observed::Error(e);
            (e.clone(), e)
        }
    };
    // Whatever happened, the lab's plan is in force again for later rows.
    let restored = lab.host.apply_after(&lab.plan, Some(&lab.plan));
    let observed = match restored {
        Ok(_) => observed,
        Err(e) => Observed::Error(format!("putting the plan back: {e}")),
    };
    Some(DrillRow {
        probe: DELETED_TABLE.to_owned(),
        from: sb.name.clone(),
        to: format!("tcp {to} (live flow)"),
        expected: Expect::Block,
        verdict: judge(Expect::Block, &control, &observed),
        observed,
        control,
        ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        packet: Some(tcp(to.ip(), to.port())),
    })
}

/// Delete the table, open and prove the flow (the control), heal, probe
/// the same flow again (the observation).
fn run(
    lab: &Lab,
    sb: &SandboxNs,
    to: SocketAddr,
    timeout: Duration,
) -> Result<(Observed, Observed), String> {
    lab.topo
        .host
        .run(|| corral_egress::nft::delete_table(TableFamily::Inet))
        .map_err(|e| format!("entering the host namespace: {e}"))?
        .map_err(|e| format!("deleting table inet corral: {e}"))?;
    let conn = sb
        .ns
        .run(|| TcpStream::connect_timeout(&to, timeout))
        .map_err(|e| format!("entering {}: {e}", sb.name))?;
    let mut conn = match conn {
        Ok(c) => c,
        // No flow to keep: the control did not land.
        Err(e) => return Ok((Observed::Rejected(e.to_string()), Observed::TimedOut)),
    };
    let control = echo(&mut conn, timeout);
    lab.host
        .apply_after(&lab.plan, Some(&lab.plan))
        .map_err(|e| format!("the heal (the plan applied again): {e}"))?;
    Ok((control, echo(&mut conn, timeout)))
}
