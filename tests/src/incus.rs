//! The local Incus daemon for end-to-end tests: connecting (with the CI
//! rule), unique names, a guard that deletes a container even on panic, and
//! TCP probes run inside a container with its own busybox `nc`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use corral_provider_incus::{IncusConfig, IncusProvider};
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{ExecRequest, ProviderError, Sandbox};

/// The provider on the local daemon, or `None` (a counted skip) when there
/// is no daemon socket; under a truthy `CI` a missing socket fails the test
/// (`corral_test_support::gate`).
pub async fn local_provider() -> Option<IncusProvider> {
    let socket = corral_test_support::gate::incus()?;
    match IncusProvider::connect(IncusConfig::local()).await {
        Ok(p) => Some(p),
        Err(e) => panic!(
            "cannot connect to the local Incus daemon at {}: {e}",
            socket.display()
        ),
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A sandbox name unique to this process and call.
pub fn unique_name(tag: &str) -> SandboxName {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    SandboxName::new(format!("e2e-{tag}-{pid}-{n}"))
        .unwrap_or_else(|e| panic!("test names are valid sandbox names: {e}"))
}

/// Owns a sandbox and deletes it when dropped, even while a test unwinds.
#[derive(Debug)]
pub struct SandboxGuard {
    sandbox: Option<Box<dyn Sandbox>>,
}

impl SandboxGuard {
    /// Guard `sandbox`.
    pub fn new(sandbox: Box<dyn Sandbox>) -> Self {
        Self {
            sandbox: Some(sandbox),
        }
    }

    /// The guarded sandbox.
    pub fn get(&self) -> &dyn Sandbox {
        // Invariant: `sandbox` is only taken by `Drop`.
        match &self.sandbox {
            Some(s) => s.as_ref(),
            None => unreachable!("a guard holds its sandbox until it is dropped"),
        }
    }
}

impl Drop for SandboxGuard {
    fn drop(&mut self) {
        let Some(sandbox) = self.sandbox.take() else {
            return;
        };
        // Drop cannot await: delete on a thread with a runtime of its own.
        let name = sandbox.name().to_string();
        let done = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(sandbox.delete())
                .map_err(|e| e.to_string())
        })
        .join();
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("cleanup: cannot delete sandbox `{name}`: {e}"),
            Err(_) => eprintln!("cleanup: deleting sandbox `{name}` panicked"),
        }
    }
}

/// What a TCP probe from inside a sandbox saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpProbe {
    /// The destination.
    pub to: SocketAddr,
    /// The destination echoed our token back.
    pub reached: bool,
    /// `nc`'s exit code and standard error, for messages.
    pub detail: String,
}

/// Token the destination's echo service sends back.
const TOKEN: &str = "corral-e2e-probe";

/// Connects from inside `sandbox` to `to` with busybox `nc` and sends a
/// token; reached only when the token comes back (a real round trip). A
/// failure to run the probe at all is an error, never "blocked".
pub async fn tcp_probe(sandbox: &dyn Sandbox, to: SocketAddr) -> Result<TcpProbe, ProviderError> {
    let script = format!("echo {TOKEN} | timeout 5 nc -w 3 \"$0\" \"$1\"");
    let req = ExecRequest::new([
        "sh".to_owned(),
        "-c".to_owned(),
        script,
        to.ip().to_string(),
        to.port().to_string(),
    ])
    .with_timeout(Duration::from_secs(15));
    let out = sandbox.exec(&req).await?;
    Ok(TcpProbe {
        to,
        reached: out.stdout_text().contains(TOKEN),
        detail: format!("exit {}: {}", out.exit_code, out.stderr_text().trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_valid_and_distinct() {
        let a = unique_name("conf");
        let b = unique_name("conf");
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("e2e-conf-"));
        // Derived names (clone, import, rename) must stay valid too.
        for suffix in ["c", "i", "r"] {
            assert!(SandboxName::new(format!("{a}-{suffix}")).is_ok());
        }
    }
}
