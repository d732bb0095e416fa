//! Command implementations of the `service-runtime` binary (argument parsing is in main.rs).

pub mod adapters;
pub mod mcp;
pub mod run;
pub mod scaffold;
pub mod schedule;
pub mod through;
