//! Command implementations of the `service-runtime` binary (argument parsing is in main.rs).

// First: the macros it defines are used by the modules after it.
#[macro_use]
pub mod output;

pub mod adapters;
pub mod backup;
pub mod mcp;
pub mod run;
pub mod scaffold;
pub mod schedule;
pub mod through;
pub mod tokens;
pub mod users;
