//! Echo listeners living inside a namespace.
//!
//! A [`Listeners`] owns one OS thread that joined the namespace and runs a
//! current-thread tokio runtime; every socket is bound on that thread, so it
//! lives in the namespace. TCP listeners accept and echo; UDP sockets echo
//! each datagram back to its sender — unless it came from a port some UDP
//! echo service of the lab listens on: a forged source naming another echo
//! service (the drill's attacks forge such sources) would start a ping-pong
//! between the two that never ends, burning a core for the rest of the
//! run. A reflector ([`Listeners::add_reflector`]) answers every datagram:
//! it stands for a service an attacker abuses, and the echo service it
//! answers does not answer back. Dropping the value stops the runtime,
//! closes every socket and joins the thread, so the namespace can die.

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::thread::JoinHandle;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use corral_egress::netns::Netns;
use corral_probes::Transport;

type Command = (
    SocketAddr,
    Transport,
    Reply,
    oneshot::Sender<io::Result<SocketAddr>>,
);

/// Whom a UDP service answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// Every sender but another echo service.
    Echo,
    /// Every sender.
    Reflect,
}

/// Ports UDP echo services of this process listen on (in any namespace).
static UDP_ECHO_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

fn udp_echo_port(port: u16) -> bool {
    UDP_ECHO_PORTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&port)
}

/// Echo services inside one namespace.
#[derive(Debug)]
pub struct Listeners {
    tx: Option<mpsc::UnboundedSender<Command>>,
    thread: Option<JoinHandle<()>>,
}

impl Listeners {
    /// Starts the service thread inside `ns`.
    pub fn start(ns: &Netns) -> io::Result<Self> {
        let fd = ns.try_clone()?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Command>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let thread = std::thread::Builder::new()
            .name("netns-listen".into())
            .spawn(move || {
                let setup = (|| -> io::Result<tokio::runtime::Runtime> {
                    enter(&fd)?;
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                })();
                let rt = match setup {
                    Ok(rt) => {
                        let _ = ready_tx.send(Ok(()));
                        rt
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    while let Some((addr, transport, mode, reply)) = rx.recv().await {
                        let _ = reply.send(bind_and_serve(addr, transport, mode).await);
                    }
                });
                // Dropping the runtime cancels the serving tasks and closes
                // their sockets.
                drop(rt);
            })?;
        ready_rx
            .recv()
            .map_err(|_| io::Error::other("the listener thread died while starting"))??;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Binds an echo service on `addr`; returns the bound address (port 0
    /// picks a free port).
    pub fn add(&self, addr: SocketAddr, transport: Transport) -> io::Result<SocketAddr> {
        self.bind(addr, transport, Reply::Echo)
    }

    /// Binds a UDP service on `addr` that answers every datagram with
    /// itself, whoever sent it (an echo service among them): the
    /// reflector a forged-source attack abuses.
    pub fn add_reflector(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        self.bind(addr, Transport::Udp, Reply::Reflect)
    }

    fn bind(&self, addr: SocketAddr, transport: Transport, mode: Reply) -> io::Result<SocketAddr> {
        let (reply_tx, reply_rx) = oneshot::channel();
        self.tx
            .as_ref()
            .ok_or_else(|| io::Error::other("listeners already stopped"))?
            .send((addr, transport, mode, reply_tx))
            .map_err(|_| io::Error::other("the listener thread has stopped"))?;
        reply_rx
            .blocking_recv()
            .map_err(|_| io::Error::other("the listener thread has stopped"))?
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot listen on {transport:?} {addr}: {e}"),
                )
            })
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn enter(ns: &Netns) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: setns on an fd owned by `ns`, changing only this thread.
    if unsafe { libc::setns(ns.fd().as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

async fn bind_and_serve(
    addr: SocketAddr,
    transport: Transport,
    mode: Reply,
) -> io::Result<SocketAddr> {
    match transport {
        Transport::Tcp => {
            let sock = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            sock.set_reuseaddr(true)?;
            if addr.is_ipv6() {
                set_v6only(&sock)?;
            }
            sock.bind(addr)?;
            let listener = sock.listen(128)?;
            let local = listener.local_addr()?;
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut buf = [0u8; 64 * 1024];
                        while let Ok(n) = stream.read(&mut buf).await {
                            if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
            Ok(local)
        }
        Transport::Udp => {
            let sock = tokio::net::UdpSocket::bind(addr).await?;
            let local = sock.local_addr()?;
            if mode == Reply::Echo {
                UDP_ECHO_PORTS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(local.port());
            }
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                    if mode == Reply::Reflect || !udp_echo_port(from.port()) {
                        let _ = sock.send_to(&buf[..n], from).await;
                    }
                }
            });
            Ok(local)
        }
    }
}

/// A `[::]` listener must not also take IPv4 (its v4 twin binds separately).
fn set_v6only(sock: &tokio::net::TcpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads `one` (a c_int we own) for the given length.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use corral_probes::{Observed, Probe, run};

    use super::*;

    /// The lab's echo services answer the probes inside their namespace;
    /// a port without a service refuses.
    #[test]
    fn loopback_probes_connect_and_refuse() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = corral_egress::netns::Netns::new().unwrap();
        let listeners = Listeners::start(&ns).unwrap();
        let tcp = listeners
            .add("127.0.0.1:0".parse().unwrap(), Transport::Tcp)
            .unwrap();
        let udp = listeners
            .add("127.0.0.1:0".parse().unwrap(), Transport::Udp)
            .unwrap();
        let t = Duration::from_millis(500);
        let results = ns
            .run(|| {
                [
                    run(&Probe::Tcp { to: tcp }, t),
                    run(&Probe::Udp { to: udp }, t),
                    run(
                        &Probe::Icmp {
                            to: "127.0.0.1".parse().unwrap(),
                        },
                        t,
                    ),
                    run(
                        &Probe::Tcp {
                            to: "127.0.0.1:1".parse().unwrap(),
                        },
                        t,
                    ),
                    run(
                        &Probe::Udp {
                            to: "127.0.0.1:1".parse().unwrap(),
                        },
                        t,
                    ),
                ]
            })
            .unwrap();
        assert_eq!(results[0].observed, Observed::Connected);
        assert_eq!(results[1].observed, Observed::Connected);
        assert_eq!(results[2].observed, Observed::Connected);
        assert!(
            matches!(results[3].observed, Observed::Rejected(_)),
            "{:?}",
            results[3]
        );
        assert!(
            matches!(results[4].observed, Observed::Rejected(_)),
            "{:?}",
            results[4]
        );
    }
}
