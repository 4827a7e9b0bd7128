//! The measurement loops corral's forwarding benchmarks share: a sink that
//! discards what it is sent, one bulk stream's throughput, the median time
//! to open a new TCP connection. Each runs on the calling thread, so a
//! bench calls it inside the namespace whose path it measures.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Accepts on `listener` and discards every byte, on threads of its own,
/// for the rest of the process.
pub fn discard(listener: TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
}

/// Binds `at` and discards whatever is sent there (`discard`): the far end
/// of a forwarding measurement.
pub fn sink(at: SocketAddr) -> io::Result<()> {
    discard(TcpListener::bind(at)?);
    Ok(())
}

/// One forwarding measurement towards a `sink` at `to`: Gbit/s of one bulk
/// stream written for `duration`, then the median microseconds to open a
/// new connection over `connects` attempts (`connect_median_us`).
pub fn forwarding(to: SocketAddr, duration: Duration, connects: usize) -> io::Result<(f64, f64)> {
    let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(2))?;
    let gbps = bulk_gbps(&mut s, duration)?;
    drop(s);
    let us = connect_median_us(to, connects)
        .ok_or_else(|| io::Error::other(format!("no connection to {to} succeeded")))?;
    Ok((gbps, us))
}

/// Gbit/s of one bulk stream written to `s` for `duration`.
pub fn bulk_gbps(s: &mut TcpStream, duration: Duration) -> io::Result<f64> {
    let buf = vec![0x5au8; 256 * 1024];
    let start = Instant::now();
    let mut sent: u64 = 0;
    while start.elapsed() < duration {
        sent += s.write(&buf)? as u64;
    }
    Ok(sent as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9)
}

/// Median time to establish a TCP connection to `to`, microseconds, over
/// `count` attempts (each closed with a reset, so no TIME_WAIT builds up);
/// `None` when none connected. The first packet of a new flow is where a
/// ruleset walks its rules; established packets never get there.
pub fn connect_median_us(to: SocketAddr, count: usize) -> Option<f64> {
    let mut lat = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        if let Ok(s) = TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            let _ = set_linger_zero(&s);
        }
    }
    (!lat.is_empty()).then(|| median(lat))
}

/// The middle value (the upper one of an even count); `v` is not empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// SO_LINGER with a zero timeout: close sends a reset.
// std has no stable setter for SO_LINGER, so this one call is libc's.
#[allow(unsafe_code)]
fn set_linger_zero(s: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `l` for its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const l).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On loopback: the sink takes a stream, new connections are timed;
    /// control: a port just closed gives no connection and so no median.
    #[test]
    fn loops_measure_a_loopback_sink() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        discard(l);
        let mut s = TcpStream::connect(at).unwrap();
        assert!(bulk_gbps(&mut s, Duration::from_millis(50)).unwrap() > 0.0);
        assert!(connect_median_us(at, 5).is_some_and(|us| us > 0.0));
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert_eq!(connect_median_us(closed, 3), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
