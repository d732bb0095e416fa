//! service-runtime: a local agent runtime whose inbound adapters are WebAssembly components.
//!
//! This crate is the top floor: the HTTP API and dashboard, the wiring of a running server, and
//! the command line (`cli`; the binary, `src/main.rs`, only calls it). The floors below are
//! their own crates: service-adapters (the component host and the adapters' supervisor),
//! service-engine (agents, MCP, the scheduler, access control, settings, telemetry) and
//! service-store (the database and the stores). The floors' modules that this crate, the
//! end-to-end tests and the benches use are re-exported here under the paths they have always
//! had (`service_runtime::db`, ...).

// `pub` is this crate's surface to the binary, the tests and the benches; the rest is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod app;
pub mod backup;
pub mod cli;
pub mod completion_webhooks;
pub mod http;
pub mod integrations;
pub mod peers;
pub mod replica;
pub mod resumer;
pub mod run_streams;
pub mod running_server;
pub mod server;
#[cfg(test)]
mod supervisor_tests;

pub use service_adapters::{adapters, wasm};
pub use service_engine::{
    a2a, access, agents, config, engine, mcp, retention, scheduler, telemetry,
};
pub use service_store::{
    approvals, bus, conversations, db, error, job_queue, kv_store, leases, liveness, notes, params,
    recordings, run_webhooks, runs, settings_store, shadows, task_runs, tasks, traces,
};
