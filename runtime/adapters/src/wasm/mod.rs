//! The WebAssembly adapter host: components loaded from `<data_dir>/adapters/` (and the
//! bundled ones), sandboxed per call, each capability a module of its own. Their lifecycle
//! belongs to the adapters' supervisor.

mod bindings;
pub mod bundled;
mod cache;
mod caps;
mod components;
mod exports;
mod folder;
mod generation;
pub mod grants;
mod guest_lane;
pub mod inventory;
mod loader;
mod loading;
pub(crate) mod outbound;
mod pool;
mod proxy;
mod rate;
pub mod recording;
mod reuse;
mod sandbox;
mod shadow;
pub mod shared;
mod state;
mod tool_bridge;
mod wasmtime_config;
mod watcher;
mod worker;

pub use components::Components;
pub use folder::shadow_file;
pub use generation::{Generation, OPTIMIZED};
pub use loader::{GrantSource, Loader, Named, check_name, imports_list};
pub use sandbox::{Sandbox, Wait};
pub use state::Services;
pub use tool_bridge::ToolBridge;
pub use watcher::watch;
pub use worker::Worker;
