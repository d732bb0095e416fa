//! Host bindings, one module per published version of the contract (`wit/`), as Zed's
//! extension host does: the host implements the newest version's imports ([`latest`]), each
//! older version's imports forward to them (`caps/`), and a component's exports are called
//! through the version it was built for (`exports`).

/// `service:adapter@0.1.0`, kept so components built for it keep loading.
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({
        world: "adapter-host",
        path: "../../wit/v0.1.0",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

/// `service:adapter@0.2.3`, the newest; it serves components built for 0.2.0 to 0.2.2 too
/// (wasmtime links an import to a semver-compatible newer definition).
pub(super) mod v0_2 {
    wasmtime::component::bindgen!({
        world: "adapter-host",
        path: "../../wit",
        imports: { default: async | trappable },
        exports: { default: async },
        // Recordings keep what crossed the boundary (`recording`).
        additional_derives: [serde::Serialize, serde::Deserialize],
    });
}

/// The newest contract, which the capabilities implement: a new version moves this alias,
/// and the version it leaves gets forwarding impls like 0.1's.
pub(super) use v0_2 as latest;
