//! `GET /metrics`: Prometheus/OpenMetrics text of corrald's families
//! (docs/operating.md lists them), encoded by `prometheus-client`. Two
//! kinds of family: events folded from the audit trail as it grows
//! ([`trail`]), and state read at each scrape ([`scrape`]).

pub mod families;
mod scrape;
mod trail;

use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::sync::Mutex;

pub use families::Families;
pub use scrape::area;
pub use trail::POLL;

use crate::state::AppState;

/// The content type of the answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry and its families.
#[derive(Debug, Clone)]
pub struct Metrics {
    families: Families,
    // One scrape at a time: a refresh clears and refills families.
    registry: Arc<Mutex<Registry>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("corral");
        let families = Families::register(&mut registry);
        Self {
            families,
            registry: Arc::new(Mutex::new(registry)),
        }
    }
}

impl Metrics {
    /// The families.
    pub fn families(&self) -> &Families {
        &self.families
    }

    /// The registry as OpenMetrics text, as it stands (no refresh).
    pub async fn encode(&self) -> Result<String, std::fmt::Error> {
        let registry = self.registry.lock().await;
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }

    /// Refresh the state families from `state`, then encode.
    pub async fn scrape(&self, state: &AppState) -> Result<String, std::fmt::Error> {
        let registry = self.registry.lock().await;
        self.families.refresh(state).await;
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
