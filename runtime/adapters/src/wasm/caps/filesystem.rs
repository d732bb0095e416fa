//! `wasi:filesystem/preopens`: no directory is ever granted. The guest's libc asks for its
//! preopened directories the first time it touches a path, so the question itself is the
//! attempt, and it is recorded on the adapter's entry. WASI's own answer, an empty list,
//! leaves nothing to open.

use wasmtime::component::{HasSelf, Linker, Resource};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::preopens;

use super::super::state::HostState;

impl preopens::Host for HostState {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        self.caller
            .deny("filesystem access (no directories are granted to components)");
        Ok(Vec::new())
    }
}

/// Replaces WASI's preopens in `linker` with the recording one above.
pub(crate) fn shadow_preopens(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = preopens::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s);
    linker.allow_shadowing(false);
    linked
}
