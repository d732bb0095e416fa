//! How a run ended when it gave no answer, and how callers of the contract see that.

use service_contract::agent::{RunFailure, RunFailureKind, Waiting};

use super::pause::Paused;
use super::provider::ProviderError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("prompt must not be empty")]
    EmptyPrompt,
    #[error("no agent named {name:?}")]
    UnknownAgent { name: String, trace_id: String },
    #[error("{error}")]
    NotConfigured {
        error: ProviderError,
        trace_id: String,
    },
    #[error("{message}")]
    Failed { message: String, trace_id: String },
    #[error("the run was cancelled")]
    Cancelled { trace_id: String },
    /// Waits for a person to approve a tool call; it goes on once decided.
    #[error("waiting for a person to approve {} (approval {})", paused.tool, paused.approval_id)]
    Paused { paused: Paused, trace_id: String },
    #[error(transparent)]
    Internal(#[from] crate::error::Error),
}

impl RunError {
    /// The trace that records the failed run, when one was written.
    pub fn trace_id(&self) -> Option<&str> {
        match self {
            Self::UnknownAgent { trace_id, .. }
            | Self::NotConfigured { trace_id, .. }
            | Self::Failed { trace_id, .. }
            | Self::Cancelled { trace_id }
            | Self::Paused { trace_id, .. } => Some(trace_id),
            Self::EmptyPrompt | Self::Internal(_) => None,
        }
    }

    /// How the run ended, as adapters and other callers of the contract see it.
    pub(crate) fn into_failure(self) -> RunFailure {
        let kind = match &self {
            Self::EmptyPrompt => RunFailureKind::Invalid,
            Self::UnknownAgent { .. } => RunFailureKind::UnknownAgent,
            Self::NotConfigured { .. } => RunFailureKind::NotConfigured,
            Self::Cancelled { .. } => RunFailureKind::Cancelled,
            Self::Paused { .. } => RunFailureKind::Paused,
            Self::Failed { .. } | Self::Internal(_) => RunFailureKind::Failed,
        };
        let waiting = match &self {
            Self::Paused { paused, .. } => Some(Box::new(Waiting {
                approval_id: paused.approval_id.clone(),
                tool: paused.tool.clone(),
                input: paused.input.to_string(),
            })),
            _ => None,
        };
        RunFailure {
            kind,
            message: self.to_string(),
            trace_id: self.trace_id().map(str::to_owned),
            waiting,
        }
    }
}
