//! The adapter contract, native side: what an adapter is and what it may use. It mirrors the
//! WIT world in `wit/` so native adapters (guildchat, the scheduler) and WebAssembly components
//! look the same in the adapter registry and the dashboard.
//!
//! No HTTP framework, no wasm engine, no SQL: this crate is the vocabulary the server and the
//! built-in adapters share.

pub mod adapter;
pub mod agent;
pub mod approvals;
pub mod error;
pub mod records;
pub mod registry;
pub mod routes;
pub mod tools;

pub use adapter::{Adapter, AdapterContext, ContextConfig, Hook, Secrets};
pub use agent::{
    AgentRunner, Budget, Parent, ProfileChoice, RunFailure, RunFailureKind, RunReply, RunRequest,
    Turn, TurnRole, Waiting,
};
pub use approvals::{Approvals, DecideError, NoApprovals, WentOnJob};
pub use error::{AdapterError, ConfigProblem, FailureKind, Missing};
pub use records::{Feedback, FeedbackStore, TaskState, TaskTracker, Vote};
pub use registry::{
    AdapterEntry, AdapterKind, AdapterPhase, AdapterRegistry, AdapterStatus, ErrorObserver,
};
pub use routes::{HttpRequest, HttpResponse, Route, RouteHandler, Routes};
pub use tools::{Tool, ToolContext, ToolHandler, ToolRegistry, ToolSpec};
