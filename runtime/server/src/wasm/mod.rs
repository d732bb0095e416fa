//! The WebAssembly adapter host.

pub mod grants;
pub mod outbound;
