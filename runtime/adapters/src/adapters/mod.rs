//! The adapters of the running server, native and WebAssembly alike, under one
//! [`Supervisor`]: it owns their entries, lifecycle, toggles and request dispatch over the
//! small [`Managed`] trait, which native adapters and component generations implement.

pub mod activity;
mod approvals;
mod managed;
mod native;
mod records;
pub(crate) mod response;
mod singletons;
mod supervisor;
mod toggles;

pub use approvals::DbApprovals;
pub use managed::{CallError, Managed};
pub use records::{DbFeedback, DbTasks};
pub use singletons::Singletons;
pub use supervisor::{Refusal, Supervisor, ToggleError};

// For the component host beside it, not for the crates above.
pub(crate) use managed::no_route;
pub(crate) use supervisor::{START_LIMIT, STOP_LIMIT};
