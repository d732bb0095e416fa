//! `log`: guest log lines, tagged with the adapter's name.

use super::super::bindings::service::adapter::log::{Host, Level};
use super::super::state::HostState;

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let adapter = self.caller.adapter.as_str();
        match level {
            Level::Debug => tracing::debug!(adapter, "{message}"),
            Level::Info => tracing::info!(adapter, "{message}"),
            Level::Warn => tracing::warn!(adapter, "{message}"),
            Level::Error => tracing::error!(adapter, "{message}"),
        }
        Ok(())
    }
}
