//! service-store: the storage floor of service-runtime.
//!
//! [`db`] puts SQLite (the default) and PostgreSQL behind one connection type; every store here
//! is plain functions over a [`db::Conn`], so it runs on either backend. Nothing in this crate
//! knows about agents, components or HTTP. `net` lives here too because the database's TLS is
//! the first thing that needs the service's trust roots.
//!
//! The async functions the floors above call (serving a run, an adapter's request, a background
//! loop) return boxed futures. An async body is compiled again in every crate that polls it
//! (the compiler instantiates it like a generic), so unboxed, each would be compiled once more
//! in every crate above with everything it awaits; boxed, it is compiled here once.

// `pub` is this crate's surface to the floors above; what only it uses is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod allowances;
pub mod approvals;
pub mod bus;
pub mod conversations;
pub mod db;
pub mod error;
pub mod job_queue;
pub mod kv_store;
pub mod leases;
pub mod liveness;
pub mod net;
pub mod notes;
pub mod recordings;
pub mod run_webhooks;
pub mod runs;
mod sealed_settings;
pub mod settings_store;
pub mod shadows;
pub mod task_runs;
pub mod tasks;
pub mod traces;
