//! `kv`: the adapter's own namespace of the persisted key-value store.

use std::sync::Arc;

use super::super::bindings::service::adapter::kv::Host;
use super::super::state::{Caller, HostState};
use crate::kv;

/// Runs a store operation in the adapter's namespace; a missing grant is a trap (the
/// component could not have loaded with the import and no grant).
async fn with_kv<T: Send + 'static>(
    caller: Arc<Caller>,
    op: impl FnOnce(&rusqlite::Connection, &str) -> crate::error::Result<T> + Send + 'static,
) -> wasmtime::Result<T> {
    if !caller.effective.kv {
        caller.deny("kv without the kv grant");
        wasmtime::bail!("kv is not granted");
    }
    let adapter = caller.adapter.clone();
    caller
        .services
        .db
        .call_inline(move |conn| op(conn, &adapter))
        .await
        .map_err(|e| wasmtime::Error::msg(e.to_string()))
}

impl Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        with_kv(self.caller.clone(), move |conn, adapter| {
            kv::get(conn, adapter, &key)
        })
        .await
    }

    async fn set(
        &mut self,
        key: String,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
    ) -> wasmtime::Result<()> {
        with_kv(self.caller.clone(), move |conn, adapter| {
            kv::set(conn, adapter, &key, &value, ttl_ms)
        })
        .await
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        with_kv(self.caller.clone(), move |conn, adapter| {
            kv::delete(conn, adapter, &key)
        })
        .await
    }

    async fn claim(&mut self, key: String, ttl_ms: u64) -> wasmtime::Result<bool> {
        with_kv(self.caller.clone(), move |conn, adapter| {
            kv::claim(conn, adapter, &key, ttl_ms)
        })
        .await
    }
}
