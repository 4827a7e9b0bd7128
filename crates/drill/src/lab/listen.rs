//! Echo listeners living inside a namespace.
//!
//! A [`Listeners`] owns one OS thread that joined the namespace and runs a
//! current-thread tokio runtime; every socket is bound on that thread, so it
//! lives in the namespace. TCP listeners accept and echo; UDP sockets echo
//! each datagram back to its sender. Dropping the value stops the runtime,
//! closes every socket and joins the thread, so the namespace can die.

use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use corral_egress::netns::Netns;

/// Transport of a listener or probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

type Command = (
    SocketAddr,
    Transport,
    oneshot::Sender<io::Result<SocketAddr>>,
);

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
                    while let Some((addr, transport, reply)) = rx.recv().await {
                        let _ = reply.send(bind_and_serve(addr, transport).await);
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
        let (reply_tx, reply_rx) = oneshot::channel();
        self.tx
            .as_ref()
            .ok_or_else(|| io::Error::other("listeners already stopped"))?
            .send((addr, transport, reply_tx))
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

async fn bind_and_serve(addr: SocketAddr, transport: Transport) -> io::Result<SocketAddr> {
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
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                    let _ = sock.send_to(&buf[..n], from).await;
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
