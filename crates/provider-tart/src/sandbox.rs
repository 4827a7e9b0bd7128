//! A handle on one Tart sandbox. Every operation re-reads the ownership
//! stamp first; `start` refuses to report success until the VM runs with a
//! live Softnet filter, and `exec` refuses while the filter is not alive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use corral_provider_support::{VmBackend, exec_output, staging_error};
use corral_sandbox_core::sandbox::{
    ExecOutput, ExecRequest, Operation, ProviderError, Sandbox, SandboxInfo, SandboxState,
    StopOptions,
};
use corral_sandbox_core::{SandboxKind, SandboxName};

use crate::health::{self, FilterHealth};
use crate::runner::{Invocation, kill_group, process_exists};
use crate::shared::{Shared, TOOL_ERRORS};
use crate::staging::{LOG_FILE, PID_FILE, Stamp};

/// One Tart sandbox.
#[derive(Debug)]
pub struct TartSandbox {
    shared: Arc<Shared>,
    name: SandboxName,
    vm: String,
}

impl TartSandbox {
    pub(crate) fn new(shared: Arc<Shared>, name: SandboxName, vm: String) -> Self {
        Self { shared, name, vm }
    }

    /// The Tart VM name (prefix + sandbox name).
    pub fn vm_name(&self) -> &str {
        &self.vm
    }

    /// The last lines of the `tart run` log, for error messages.
    fn log_tail(&self) -> String {
        let log = self
            .shared
            .tool
            .staging
            .read_file(&self.vm, LOG_FILE)
            .ok()
            .flatten()
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&log);
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join(" | ");
        if tail.is_empty() {
            "the run log is empty".to_owned()
        } else {
            format!("run log: {tail}")
        }
    }

    /// Kill `tart run` (and Softnet with it) — only if the recorded pid is
    /// still this VM's `tart run`.
    async fn kill_run(&self) -> Result<(), ProviderError> {
        let s = &self.shared;
        let Some(pid) = s.run_pid(&self.vm)? else {
            return Ok(());
        };
        let out = s
            .tool
            .runner
            .run(&Invocation::new(health::ps_argv(), s.tool.command_timeout))
            .await
            .map_err(|e| ProviderError::Io {
                context: format!("cannot read the process table to stop `{}`: {e}", self.vm),
                source: std::io::Error::other(e),
            })?;
        let table = health::parse_ps(&String::from_utf8_lossy(&out.stdout)).unwrap_or_default();
        if health::is_tart_run_of(&table, pid, &self.vm) {
            kill_group(pid);
        }
        s.tool
            .staging
            .remove_file(&self.vm, PID_FILE)
            .map_err(staging_error)
    }

    async fn state(&self) -> Result<SandboxState, ProviderError> {
        Ok(self.shared.vm(&self.vm).await?.state)
    }

    /// Wait until the VM runs with a live filter, or fail closed.
    async fn await_boot(&self, pid: u32) -> Result<(), ProviderError> {
        let s = &self.shared;
        let deadline = Instant::now() + s.timeouts.boot;
        loop {
            if !process_exists(pid) {
                let _ = s.tool.staging.remove_file(&self.vm, PID_FILE);
                return Err(ProviderError::Backend {
                    kind: SandboxKind::Tart,
                    operation: "run".to_owned(),
                    message: format!(
                        "`tart run {}` exited while booting; {}",
                        self.vm,
                        self.log_tail()
                    ),
                    code: None,
                });
            }
            let health = s.filter_health(&self.vm).await;
            let state = self.state().await?;
            if health.is_alive() && state == SandboxState::Running {
                return Ok(());
            }
            if Instant::now() >= deadline {
                // Never leave a VM running without its filter.
                self.kill_run().await?;
                if state == SandboxState::Running {
                    return Err(ProviderError::Backend {
                        kind: SandboxKind::Tart,
                        operation: "run".to_owned(),
                        message: format!(
                            "`{}` booted but its Softnet filter is {health}; corral stopped it (there is no fallback to NAT); {}",
                            self.vm,
                            self.log_tail()
                        ),
                        code: None,
                    });
                }
                return Err(ProviderError::Timeout {
                    operation: format!("tart run `{}` (boot)", self.vm),
                    after: s.timeouts.boot,
                });
            }
            tokio::time::sleep(s.timeouts.poll).await;
        }
    }
}

#[async_trait]
impl Sandbox for TartSandbox {
    fn name(&self) -> &SandboxName {
        &self.name
    }

    fn kind(&self) -> SandboxKind {
        SandboxKind::Tart
    }

    /// `Alive` only while the VM's Softnet process runs.
    async fn filter_health(&self) -> Result<Option<FilterHealth>, ProviderError> {
        self.shared.owned(&self.vm).await?;
        Ok(Some(self.shared.filter_health(&self.vm).await))
    }

    async fn info(&self) -> Result<SandboxInfo, ProviderError> {
        let s = &self.shared;
        let stamp = s.owned(&self.vm).await?;
        let entry = s.vm(&self.vm).await?;
        let mut info = s.info_of(self.name.clone(), &stamp, &entry);
        if entry.state == SandboxState::Running {
            // Addresses are informational: a VM still waiting for DHCP has none yet.
            if let Ok(out) = s.run("ip", &self.vm, s.argv.ip(&self.vm)).await {
                info.addresses = String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
            }
        }
        Ok(info)
    }

    async fn start(&self) -> Result<(), ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        s.preflight_softnet()?;
        let policy = s.policy(&self.vm)?;
        let state = self.state().await?;
        if !state.can_start() {
            return Err(ProviderError::InvalidState {
                name: self.name.to_string(),
                state,
                operation: Operation::Start,
                hint: "stop it first".to_owned(),
            });
        }
        let argv = s.argv.run(&self.vm, &policy, &s.extra_run_args);
        let log = s.tool.staging.dir(&self.vm).join(LOG_FILE);
        let pid = s
            .tool
            .runner
            .spawn_detached(&argv, &log)
            .await
            .map_err(|e| TOOL_ERRORS.run_error("run", &self.vm, e))?;
        s.tool
            .staging
            .write_file(&self.vm, PID_FILE, pid.to_string().as_bytes())
            .map_err(staging_error)?;
        self.await_boot(pid).await
    }

    async fn stop(&self, options: StopOptions) -> Result<(), ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        if options.force {
            return self.kill_run().await;
        }
        let secs = options.timeout.map(|d| d.as_secs().max(1));
        // tart waits `secs` for a clean shutdown before it kills; allow for that.
        let bound = options
            .timeout
            .map_or(s.tool.command_timeout, |d| d + Duration::from_secs(30));
        s.run_for("stop", &self.vm, s.argv.stop(&self.vm, secs), bound)
            .await?;
        s.tool
            .staging
            .remove_file(&self.vm, PID_FILE)
            .map_err(staging_error)
    }

    async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput, ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        let argv = s.argv.exec(&self.vm, request)?;
        let health = s.filter_health(&self.vm).await;
        if !health.is_alive() {
            return Err(ProviderError::Backend {
                kind: SandboxKind::Tart,
                operation: "exec".to_owned(),
                message: format!(
                    "the Softnet filter of `{}` is {health}; corral runs nothing in a Tart VM whose filter is not known to be alive — stop and delete it",
                    self.vm
                ),
                code: None,
            });
        }
        let output = s
            .tool
            .exec(argv, request, s.timeouts.exec)
            .await
            .map_err(|e| TOOL_ERRORS.run_error("exec", &self.vm, e))?;
        Ok(exec_output(output))
    }

    async fn delete(self: Box<Self>) -> Result<(), ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        match self.state().await {
            Err(ProviderError::NotFound { .. }) => {
                return s.tool.staging.remove(&self.vm).map_err(staging_error);
            }
            Err(e) => return Err(e),
            Ok(SandboxState::Running) => {
                s.run("stop", &self.vm, s.argv.stop(&self.vm, None)).await?;
            }
            Ok(_) => {}
        }
        s.run("delete", &self.vm, s.argv.delete(&self.vm)).await?;
        s.tool.staging.remove(&self.vm).map_err(staging_error)
    }

    async fn rename(self: Box<Self>, to: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        let stamp = s.owned(&self.vm).await?;
        let new_vm = s.unclaimed_vm(to)?;
        let state = self.state().await?;
        if !state.can_rename() {
            return Err(ProviderError::InvalidState {
                name: self.name.to_string(),
                state,
                operation: Operation::Rename,
                hint: "stop it first".to_owned(),
            });
        }
        s.run("rename", &self.vm, s.argv.rename(&self.vm, &new_vm))
            .await?;
        // The VM has its new name now; its stamp must follow, or corral
        // would lose track of a VM it owns.
        s.tool
            .staging
            .rename(&self.vm, &new_vm)
            .map_err(staging_error)?;
        s.tool
            .staging
            .write_stamp(&Stamp {
                vm: new_vm.clone(),
                sandbox: to.to_string(),
                ..stamp
            })
            .map_err(staging_error)?;
        Ok(s.handle(to.clone(), new_vm))
    }

    async fn clone_to(
        &self,
        target: &SandboxName,
        from_snapshot: Option<&str>,
    ) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        let (stamp, target_vm) = s
            .clone_prelude(
                &self.vm,
                target,
                from_snapshot,
                "Tart has no snapshots; clone the sandbox itself",
            )
            .await?;
        let state = self.state().await?;
        if state != SandboxState::Stopped {
            return Err(ProviderError::InvalidState {
                name: self.name.to_string(),
                state,
                operation: Operation::Clone,
                hint: "stop it first so the copy is consistent".to_owned(),
            });
        }
        let policy = s.policy(&self.vm)?;
        s.tool
            .staging
            .claim(&stamp.for_clone(&target_vm, target, None))?;
        s.store_policy(&target_vm, &policy)?;
        let cloned = s
            .run_for(
                "clone",
                &target_vm,
                s.argv.clone_vm(&self.vm, &target_vm),
                s.timeouts.clone,
            )
            .await;
        s.tool.staging.discard_unless_timeout(&target_vm, cloned)?;
        Ok(s.handle(target.clone(), target_vm))
    }
}
