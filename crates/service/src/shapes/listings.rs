//! Lists that are not sandboxes: the templates and the event log.

use serde::Serialize;

use crate::store::StoredEvent;
use crate::templates::Template;

/// The templates' schema id.
pub const TEMPLATES: &str = "corral.templates.v1";
/// The event log's schema id.
pub const EVENTS: &str = "corral.events.v1";

/// `corral templates --json`, `GET /v1/templates`.
#[derive(Debug, Clone, Serialize)]
pub struct TemplateList {
    /// [`TEMPLATES`].
    pub schema: &'static str,
    /// Where the operator's template files are read from.
    pub directory: String,
    /// Every template, by name.
    pub templates: Vec<Template>,
}

impl TemplateList {
    /// `templates`, the operator's read from `directory`.
    pub fn new(directory: &std::path::Path, templates: Vec<Template>) -> Self {
        Self {
            schema: TEMPLATES,
            directory: directory.display().to_string(),
            templates,
        }
    }
}

/// `corral events --json`, `GET /v1/events`.
#[derive(Debug, Clone, Serialize)]
pub struct EventList {
    /// [`EVENTS`].
    pub schema: &'static str,
    /// The events, oldest first.
    pub events: Vec<StoredEvent>,
}

impl EventList {
    /// `events`.
    pub fn new(events: Vec<StoredEvent>) -> Self {
        Self {
            schema: EVENTS,
            events,
        }
    }
}
