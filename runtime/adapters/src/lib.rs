//! service-adapters: the adapters of service-runtime.
//!
//! [`wasm`] is the component host: it loads, sandboxes and calls WebAssembly components, one
//! host module per capability a component may be granted. [`adapters`] is the registry and
//! supervisor of every adapter, components and native ones alike. The HTTP API and the binary
//! sit on top (service-runtime).

pub mod adapters;
pub mod wasm;

// The floors below, under the paths the modules above have always used (`crate::db`, ...).
use service_engine::{agents, config, engine, placeholders, telemetry};
use service_store::{
    allowances, approvals, bus, db, error, job_queue, kv_store, leases, net, params,
    settings_store, task_runs, tasks, traces,
};
