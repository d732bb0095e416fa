//! service-runtime: a local agent runtime whose inbound adapters are WebAssembly components.
//!
//! The binary (`src/main.rs`) is only the command line; everything else lives here so the
//! tests can reach it.

pub mod access;
pub mod adapters;
pub mod agents;
pub mod allowances;
pub mod app;
pub mod approvals;
pub mod backup;
pub mod bus;
pub mod config;
pub mod conversations;
pub mod db;
pub mod engine;
pub mod error;
pub mod http;
pub mod integrations;
pub mod job_queue;
pub mod kv_store;
pub mod leases;
pub mod mcp;
pub mod net;
pub mod notes;
pub mod peers;
pub mod placeholders;
pub mod replica;
pub mod resumer;
pub mod retention;
pub mod running_server;
pub mod scheduler;
pub mod sealed_settings;
pub mod server;
pub mod settings_store;
pub mod task_runs;
pub mod tasks;
pub mod telemetry;
pub mod traces;
pub mod wasm;
