//! The adapter contract (spec 2.6): a named object with optional lifecycle hooks, given a
//! read-only context. Optional hooks are detected by presence: `start` and `stop` return `None`
//! when the adapter does not have them.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::agent::AgentRunner;
use crate::approvals::Approvals;
use crate::error::AdapterError;
use crate::records::{FeedbackStore, TaskTracker};
use crate::registry::AdapterRegistry;
use crate::routes::Routes;
use crate::tools::ToolRegistry;

/// A lifecycle hook's future.
pub type Hook<'a> = BoxFuture<'a, Result<(), AdapterError>>;

pub trait Adapter: Send + Sync {
    /// Stable name; HTTP routes of an adapter live under `/api/adapters/<name>/`.
    fn name(&self) -> &str;

    /// Static metadata for diagnostics.
    fn describe(&self) -> Value {
        Value::Null
    }

    /// Called once at startup, before `start`: mounts the adapter's HTTP routes (served under
    /// `/api/adapters/<name>/`) and does setup such as registering tools.
    fn bind(&self, _routes: &mut Routes, _ctx: &Arc<AdapterContext>) -> Result<(), AdapterError> {
        Ok(())
    }

    /// Launches background work. Must not block; long-lived work goes on a task of its own.
    fn start<'a>(&'a self, _ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
        None
    }

    /// Stops that work promptly.
    fn stop(&self) -> Option<Hook<'_>> {
        None
    }

    /// The settings it reads when it starts: when one is written while it runs, the host
    /// stops and starts it again, so it takes the new value at once.
    fn settings(&self) -> &[&str] {
        &[]
    }
}

/// Secrets and settings from the environment (and the data directory's `.env`).
pub trait Secrets: Send + Sync {
    /// The value, or `None` when unset or empty.
    fn get(&self, name: &str) -> Option<String>;
}

/// Resolved configuration an adapter may read.
#[derive(Debug, Clone)]
pub struct ContextConfig {
    pub database_path: PathBuf,
    pub default_provider: String,
    pub default_model: String,
}

/// What every adapter is handed. Shared behind an `Arc`, so it is read-only.
pub struct AdapterContext {
    pub config: ContextConfig,
    pub data_dir: PathBuf,
    pub registry: Arc<AdapterRegistry>,
    /// The master tool registry, when one is wired in.
    pub tool_registry: Option<Arc<ToolRegistry>>,
    pub agents: Arc<dyn AgentRunner>,
    /// Deciding approvals of its runs, and hearing where they went on.
    pub approvals: Arc<dyn Approvals>,
    pub secrets: Arc<dyn Secrets>,
    pub tasks: Arc<dyn TaskTracker>,
    pub feedback: Arc<dyn FeedbackStore>,
}
