//! The host side of each import, one capability per module. Each acts for the calling adapter
//! only (its identity comes from the store, never from an argument) and within its grant.

mod agent;
mod filesystem;
mod jobs;
mod kv;
mod log;
mod outbound_http;
mod registry;
mod secrets;
mod tools;

pub use filesystem::shadow_preopens;

use super::bindings::types;
use super::state::HostState;

impl types::Host for HostState {}
