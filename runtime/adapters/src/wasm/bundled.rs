//! Components compiled into the binary (see `build.rs`), each with its default grant.

pub struct Bundled {
    pub name: &'static str,
    /// `None` when the binary was built without the wasm32-wasip2 target.
    pub wasm: Option<&'static [u8]>,
    pub grant: &'static str,
}

pub const BUNDLED: &[Bundled] = include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// What a bundled component missing from the build says on its registry entry.
pub(crate) const NOT_BUILT: &str = "this binary was built without the wasm32-wasip2 target: run `rustup target add wasm32-wasip2` and build again";
