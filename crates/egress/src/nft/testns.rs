//! Test-only: run a closure inside a fresh anonymous network namespace on
//! a throwaway thread. The kernel removes the namespace (and every table in
//! it) when the thread ends, even on a panic; nothing touches the host.

/// Run `f` in a new network namespace. Returns `None` (after saying why)
/// when namespaces are unavailable and `CI` is not `true`; panics when `CI`
/// is `true`, so CI can never skip silently.
pub(crate) fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let joined = std::thread::spawn(move || {
        // SAFETY: unshare only affects this (new, single-purpose) thread's
        // network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(f())
    })
    .join();
    match joined {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("CI=true but a network namespace cannot be created: {e}");
            }
            eprintln!("skipped: cannot create a network namespace ({e}); run as root");
            None
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
