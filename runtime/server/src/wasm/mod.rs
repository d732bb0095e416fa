//! The WebAssembly adapter host.

pub mod grants;
