//! Host bindings generated from `wit/adapter.wit` (world `adapter-host`: every import, and
//! every export the host understands; optional exports are looked up one by one).

wasmtime::component::bindgen!({
    world: "adapter-host",
    path: "../../wit",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use exports::service::adapter::{handler, lifecycle, tool_provider};
pub use service::adapter::types;
