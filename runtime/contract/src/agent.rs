//! Running an agent: what adapters ask of the engine.

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// Which profile a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileChoice {
    /// This profile, or the run fails (chat, delegation, schedules).
    Required(String),
    /// This profile when it exists, else the server defaults with no system prompt (adapters).
    Preferred(String),
}

#[derive(Debug, Clone)]
pub struct RunRequest {
    pub prompt: String,
    pub profile: ProfileChoice,
    /// Overrides the profile's and the server's model.
    pub model: Option<String>,
    /// Where the run came from (`chat`, `cli`, an adapter name, `scheduler`, ...).
    pub source: String,
    pub parent: Option<Parent>,
}

/// The run that delegated this one.
#[derive(Debug, Clone)]
pub struct Parent {
    pub trace_id: String,
    pub depth: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReply {
    pub trace_id: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFailureKind {
    /// The request itself is wrong (an empty prompt).
    Invalid,
    UnknownAgent,
    /// No usable LLM provider is configured.
    NotConfigured,
    /// The provider or the loop failed.
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RunFailure {
    pub kind: RunFailureKind,
    pub message: String,
    /// The error trace of the failed run, when one was written.
    pub trace_id: Option<String>,
}

/// Runs agents; every run records one trace.
pub trait AgentRunner: Send + Sync {
    fn run(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<RunReply, RunFailure>>;

    /// The active provider's name, as status cards show it.
    fn provider_name(&self) -> String;
}
