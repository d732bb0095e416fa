//! service-adapters: the adapters of service-runtime.
//!
//! [`wasm`] is the component host: it loads, sandboxes and calls WebAssembly components, one
//! host module per capability a component may be granted. [`adapters`] is the registry and
//! supervisor of every adapter, components and native ones alike. The HTTP API and the binary
//! sit on top (service-runtime).
//!
//! The async functions the floors above call (serving a run, an adapter's request, a background
//! loop) return boxed futures. An async body is compiled again in every crate that polls it
//! (the compiler instantiates it like a generic), so unboxed, each would be compiled once more
//! in every crate above with everything it awaits; boxed, it is compiled here once.

// `pub` is this crate's surface to the floors above; what only it uses is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod adapters;
pub mod wasm;

// The floors below, under the paths the modules above have always used (`crate::db`, ...).
use service_engine::{agents, config, engine, placeholders, telemetry};
use service_store::{
    allowances, approvals, bus, db, error, job_queue, kv_store, leases, net, params, recordings,
    settings_store, shadows, task_runs, tasks, traces,
};
