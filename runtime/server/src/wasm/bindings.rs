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

/// The native contract's request is the same record as the world's.
impl From<service_contract::HttpRequest> for types::HttpRequest {
    fn from(r: service_contract::HttpRequest) -> Self {
        Self {
            method: r.method,
            path: r.path,
            query: r.query,
            headers: r.headers,
            body: r.body,
        }
    }
}
