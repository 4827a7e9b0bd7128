//! Anonymous network namespaces owned by a file descriptor.
//!
//! A namespace created here has no name in `/run/netns`: it lives exactly as
//! long as its fd (and any process or socket inside it). Dropping the last
//! [`Netns`] — even while unwinding from a panic — lets the kernel remove the
//! namespace and every veth, bridge, address and nft table in it, so tests
//! can run in parallel and never leak state onto the host.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// Where `ip netns add NAME` bind-mounts named namespaces.
const NAMED_NETNS_DIR: &str = "/run/netns";

/// A network namespace, kept alive by the fd this value owns.
#[derive(Debug)]
pub struct Netns {
    fd: OwnedFd,
    origin: Origin,
}

/// How a [`Netns`] came to be, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Anonymous,
    Opened(PathBuf),
    /// The process's own namespace: code runs here without `setns`, so the
    /// host commands need only CAP_NET_ADMIN, not CAP_SYS_ADMIN.
    Current,
}

impl Netns {
    /// Creates a new anonymous network namespace with `lo` up.
    ///
    /// Needs CAP_SYS_ADMIN (run as root). The calling thread's namespace is
    /// never changed: the `unshare` happens on a throwaway thread.
    pub fn new() -> io::Result<Self> {
        let fd = std::thread::Builder::new()
            .name("netns-new".into())
            .spawn(|| -> io::Result<OwnedFd> {
                // SAFETY: unshare only changes this throwaway thread's
                // namespace membership; it takes no pointers.
                let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
                if rc != 0 {
                    return Err(privilege_hint(
                        io::Error::last_os_error(),
                        "create a network namespace",
                    ));
                }
                let file = File::open("/proc/thread-self/ns/net")?;
                Ok(OwnedFd::from(file))
            })?
            .join()
            .map_err(|_| io::Error::other("the namespace-creating thread panicked"))??;
        let ns = Self {
            fd,
            origin: Origin::Anonymous,
        };
        ns.run(set_loopback_up)??;
        Ok(ns)
    }

    /// Opens an existing namespace by NAME (looked up in `/run/netns`) or by
    /// PATH (anything containing a `/`, e.g. `/proc/1234/ns/net`).
    pub fn open(name_or_path: &str) -> io::Result<Self> {
        let path = resolve_path(name_or_path);
        let file = File::open(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open network namespace {}: {e}", path.display()),
            )
        })?;
        Ok(Self {
            fd: OwnedFd::from(file),
            origin: Origin::Opened(path),
        })
    }

    /// The namespace of the calling process (`/proc/self/ns/net`). Work
    /// run "inside" it needs no `setns`, hence no CAP_SYS_ADMIN.
    pub fn current() -> io::Result<Self> {
        let ns = Self::open("/proc/self/ns/net")?;
        Ok(Self {
            origin: Origin::Current,
            ..ns
        })
    }

    /// The fd naming this namespace, e.g. for `IFLA_NET_NS_FD` when moving a
    /// veth peer into it.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The path this namespace was opened from, or `None` if anonymous.
    pub fn path(&self) -> Option<&Path> {
        match &self.origin {
            Origin::Anonymous => None,
            Origin::Opened(p) => Some(p),
            Origin::Current => Some(Path::new("/proc/self/ns/net")),
        }
    }

    /// Duplicates the fd, giving a second owner of the same namespace.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            fd: self.fd.try_clone()?,
            origin: self.origin.clone(),
        })
    }

    /// Runs `f` on a throwaway thread that has joined this namespace, so any
    /// socket `f` opens (netlink included) lives in the namespace.
    pub fn run<F, T>(&self, f: F) -> io::Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let fd = self.fd.as_raw_fd();
        let enter = self.origin != Origin::Current;
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("netns-run".into())
                .spawn_scoped(scope, move || -> io::Result<T> {
                    if enter {
                        setns_net(fd)?;
                    }
                    Ok(f())
                })?
                .join()
                .map_err(|_| {
                    io::Error::other("a thread running inside a network namespace panicked")
                })?
        })
    }

    /// Like [`Netns::run`], but drives the future `f()` returns to completion
    /// on a current-thread tokio runtime owned by the throwaway thread
    /// (rtnetlink needs a runtime, and its socket must be opened inside the
    /// namespace, i.e. inside `f`).
    pub fn run_async<F, Fut, T>(&self, f: F) -> io::Result<T>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = T>,
        T: Send,
    {
        self.run(move || -> io::Result<T> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            Ok(rt.block_on(f()))
        })?
    }

    /// Runs `f` on the calling thread, which first enters this namespace
    /// for the rest of its life: for a thread spawned to serve inside it
    /// (its sockets opened there), where [`Netns::run`] would start a
    /// second thread and leave the first waiting on it. Only for a thread
    /// of its own that ends with its work.
    pub fn enter_and_run<T>(&self, f: impl FnOnce() -> T) -> io::Result<T> {
        if self.origin != Origin::Current {
            setns_net(self.fd.as_raw_fd())?;
        }
        Ok(f())
    }

    /// [`Netns::enter_and_run`] for a future, on a current-thread tokio
    /// runtime of the calling thread (as [`Netns::run_async`]).
    pub fn enter_and_run_async<Fut: Future>(
        &self,
        f: impl FnOnce() -> Fut,
    ) -> io::Result<Fut::Output> {
        self.enter_and_run(|| -> io::Result<Fut::Output> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            Ok(rt.block_on(f()))
        })?
    }

    /// Spawns `cmd` inside this namespace.
    pub fn spawn(&self, mut cmd: Command) -> io::Result<Child> {
        if self.origin == Origin::Current {
            return cmd.spawn();
        }
        // A child starts in the namespace of the thread that creates it:
        // create it from a thread inside the namespace. (A `pre_exec`
        // setns would force a full fork of this process, which copies its
        // page tables and serialises concurrent starts on its memory map —
        // ~18 ms a dnsmasq with 8 at once; without a hook the standard
        // library spawns by `posix_spawn`.)
        self.run(move || cmd.spawn())?
    }
}

impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Maps a `--netns` argument to a path: NAME → /run/netns/NAME.
fn resolve_path(name_or_path: &str) -> PathBuf {
    if name_or_path.contains('/') {
        PathBuf::from(name_or_path)
    } else {
        Path::new(NAMED_NETNS_DIR).join(name_or_path)
    }
}

fn setns_net(fd: i32) -> io::Result<()> {
    // SAFETY: setns takes an fd we own for the duration of the call (the
    // caller borrows `self`) and changes only the calling thread.
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(privilege_hint(
            io::Error::last_os_error(),
            "enter a network namespace",
        ));
    }
    Ok(())
}

/// Adds the capability and the way to get it to a permission error.
fn privilege_hint(err: io::Error, what: &str) -> io::Error {
    if err.kind() == io::ErrorKind::PermissionDenied {
        io::Error::new(
            err.kind(),
            format!("cannot {what}: CAP_SYS_ADMIN is missing ({err}); run as root"),
        )
    } else {
        io::Error::new(err.kind(), format!("cannot {what}: {err}"))
    }
}

/// Brings `lo` up with a plain ioctl (no runtime needed on this path).
fn set_loopback_up() -> io::Result<()> {
    // SAFETY: a plain datagram socket; the fd is wrapped in OwnedFd at once.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd owned by nobody else.
    let sock = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads into the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after SIOCGIFFLAGS the union holds the flags member.
    unsafe {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns_inode(path: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).map(|m| m.ino()).unwrap_or(0)
    }

    #[test]
    fn named_and_path_arguments_resolve() {
        assert_eq!(resolve_path("blue"), PathBuf::from("/run/netns/blue"));
        assert_eq!(
            resolve_path("/proc/1/ns/net"),
            PathBuf::from("/proc/1/ns/net")
        );
    }

    #[test]
    fn run_enters_a_different_namespace_and_lo_is_up() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let host = ns_inode("/proc/thread-self/ns/net");
        let inside = ns.run(|| ns_inode("/proc/thread-self/ns/net")).unwrap();
        assert_ne!(host, inside);
        assert_eq!(host, ns_inode("/proc/thread-self/ns/net"));
        // Binding and connecting over 127.0.0.1 only works once lo is up.
        let bound = ns
            .run(|| {
                let l = std::net::TcpListener::bind("127.0.0.1:0")?;
                std::net::TcpStream::connect(l.local_addr()?).map(|_| ())
            })
            .unwrap();
        assert!(bound.is_ok(), "lo should be up: {bound:?}");
    }

    #[test]
    fn enter_and_run_stays_on_the_calling_thread_and_enters_there() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let inside = ns.run(|| ns_inode("/proc/thread-self/ns/net")).unwrap();
        let host = ns_inode("/proc/thread-self/ns/net");
        let (here, entered, after) = std::thread::scope(|s| {
            s.spawn(|| {
                let me = std::thread::current().id();
                let (here, entered) = ns
                    .enter_and_run(|| {
                        (
                            std::thread::current().id() == me,
                            ns_inode("/proc/thread-self/ns/net"),
                        )
                    })
                    .unwrap();
                // The thread stays inside for the rest of its life.
                (here, entered, ns_inode("/proc/thread-self/ns/net"))
            })
            .join()
            .unwrap()
        });
        assert!(here, "ran on another thread");
        assert_eq!((entered, after), (inside, inside));
        assert_eq!(
            host,
            ns_inode("/proc/thread-self/ns/net"),
            "the caller's thread moved"
        );
        let v = std::thread::scope(|s| {
            s.spawn(|| ns.enter_and_run_async(|| async { 7 }).unwrap())
                .join()
                .unwrap()
        });
        assert_eq!(v, 7);
    }

    #[test]
    fn run_async_has_a_runtime() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let v = ns
            .run_async(|| async {
                tokio::task::yield_now().await;
                7
            })
            .unwrap();
        assert_eq!(v, 7);
    }

    #[test]
    fn spawn_runs_inside_the_namespace() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let inside = ns.run(|| ns_inode("/proc/thread-self/ns/net")).unwrap();
        let mut cmd = Command::new("stat");
        cmd.args(["-L", "-c", "%i", "/proc/self/ns/net"]);
        cmd.stdout(std::process::Stdio::piped());
        let out = ns.spawn(cmd).unwrap().wait_with_output().unwrap();
        let ino: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(ino, inside);
    }

    #[test]
    fn open_reports_the_path_on_failure() {
        let err = Netns::open("corral-no-such-ns").unwrap_err();
        assert!(err.to_string().contains("/run/netns/corral-no-such-ns"));
    }
}
