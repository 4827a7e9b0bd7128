//! The start of a server thread that sets itself up inside a network
//! namespace: its caller learns whether the set-up (sockets bound, the
//! bridge read) worked before it returns, so an error means nothing runs.

use std::io;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

/// Waits for `thread` to report its set-up on `ready`; on failure joins it
/// and says what could not serve `bridge`.
pub(crate) fn await_ready(
    thread: JoinHandle<()>,
    ready: &Receiver<io::Result<()>>,
    what: &str,
    bridge: &str,
) -> io::Result<JoinHandle<()>> {
    match ready.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(io::Error::new(
                e.kind(),
                format!("{what} cannot serve bridge {bridge}: {e}"),
            ))
        }
        Err(_) => {
            let _ = thread.join();
            Err(io::Error::other(format!(
                "{what}: its thread ended before it was ready (the network namespace could not be entered)"
            )))
        }
    }
}
