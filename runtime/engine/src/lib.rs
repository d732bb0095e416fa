//! service-engine: what runs an agent and decides who may ask it to, on the storage floor.
//!
//! The agent engine (providers, tools, turns), agent profiles and bundles, MCP both ways, the
//! scheduler, access control (people, roles, tokens, single sign-on), the settings file,
//! retention and telemetry. Nothing here knows about WebAssembly components or the HTTP API.
//!
//! The async functions the floors above call (serving a run, an adapter's request, a background
//! loop) return boxed futures. An async body is compiled again in every crate that polls it
//! (the compiler instantiates it like a generic), so unboxed, each would be compiled once more
//! in every crate above with everything it awaits; boxed, it is compiled here once.

// `pub` is this crate's surface to the floors above; what only it uses is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod a2a;
pub mod access;
pub mod agents;
pub mod config;
pub mod engine;
mod kept;
pub mod mcp;
pub mod placeholders;
pub mod retention;
pub mod scheduler;
pub mod telemetry;

// The stores, under the paths the modules above have always used (`crate::db`, ...).
use service_store::{
    approvals, conversations, db, error, job_queue, leases, net, notes, params, runs,
    settings_store, task_runs, tasks, traces,
};
