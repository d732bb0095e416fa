//! The WebAssembly adapter host.

mod bindings;
pub mod bundled;
mod caps;
mod component;
mod engine;
pub mod grants;
mod host;
pub mod outbound;
mod state;
mod worker;

pub use host::{CallError, Generation, HttpRequest, HttpResponse, WasmHost};
pub use state::Services;
pub use worker::Worker;
