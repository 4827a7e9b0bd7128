//! What every sandbox command needs: the configuration, the service's
//! settings (namespace and state directory by the same rule as `host
//! apply`), the provider chosen through the platform matrix, the store
//! (events, the verification gate — the database corrald opens too) with
//! the canary as the hand-out hook, an async runtime; and how the
//! service's errors become exit codes.

use std::sync::Arc;

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::ProviderError;
use corral_service::templates::TemplateError;
use corral_service::{
    Backend, SandboxService, ServiceError, Settings, Store, Verifier, VerifyError, WallClock,
};

use crate::args::SandboxContext;
use crate::error::CliError;
use crate::load;

/// The service for one command, with the runtime it runs on.
pub fn service(
    ctx: &SandboxContext,
) -> Result<(SandboxService, tokio::runtime::Runtime), CliError> {
    let (svc, _, rt) = verified_service(ctx)?;
    Ok((svc, rt))
}

/// The settings and the store alone (for `events` and `gate`).
pub fn store(ctx: &SandboxContext) -> Result<(Settings, Store), CliError> {
    let loaded = load::load(&ctx.source)?;
    let settings = Settings::new(
        corral_service::LoadedConfig {
            config: loaded.config,
            origin: loaded.origin,
        },
        ctx.netns.clone(),
        ctx.state_dir.as_deref(),
    );
    let store = Store::open(&settings.state_dir).map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context("cannot open corral's store"))
    })?;
    Ok((settings, store))
}

/// The service with the canary as its hand-out hook, the verifier itself,
/// and the runtime.
pub fn verified_service(
    ctx: &SandboxContext,
) -> Result<(SandboxService, Verifier, tokio::runtime::Runtime), CliError> {
    let loaded = load::load(&ctx.source)?;
    let backend = Backend::select(
        std::env::consts::OS,
        SandboxKind::Incus,
        &loaded.config.host,
        ctx.incus_socket.clone(),
    )
    .map_err(CliError::usage)?
    .with_profiles(&loaded.config.profiles);
    let settings = Settings::new(
        corral_service::LoadedConfig {
            config: loaded.config,
            origin: loaded.origin,
        },
        ctx.netns.clone(),
        ctx.state_dir.as_deref(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::failure(anyhow::Error::new(e).context("cannot start the async runtime"))
        })?;
    let store = Store::open(&settings.state_dir).map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context("cannot open corral's store"))
    })?;
    let settings = Arc::new(settings);
    let store = Arc::new(store);
    // Sandboxes in granted users' projects are found as well.
    let backend = Arc::new(backend.with_user_projects(Arc::clone(&store) as _));
    let verifier = Verifier::new(Arc::clone(&settings), store, Arc::new(WallClock))
        .with_backend(Arc::clone(&backend));
    let svc = SandboxService::new(settings, backend).with_hooks(Arc::new(verifier.clone()));
    Ok((svc, verifier, runtime))
}

/// A service error as a CLI error: input that must change (a bad name or
/// spec, an unknown profile or template, a template file with a mistake,
/// arguments the escape hatch refuses)
/// is usage (exit 2); everything else — refused by the start gate, not
/// corral's, not found, taken — is a failure (exit 1).
pub fn fail(e: ServiceError) -> CliError {
    let usage = matches!(
        &e,
        ServiceError::Provider(
            ProviderError::InvalidSpec { .. } | ProviderError::UnknownProfile { .. }
        ) | ServiceError::Template(TemplateError::Unknown { .. } | TemplateError::Invalid(_))
    ) || matches!(&e, ServiceError::Hatch(_))
        || matches!(&e, ServiceError::Verify(v) if matches!(v.as_ref(), VerifyError::NoProfile(_)));
    if usage {
        CliError::usage(e)
    } else {
        CliError::failure(e)
    }
}
