//! `registry`: the adapter's own registry entry.

use super::super::bindings::service::adapter::registry::Host;
use super::super::state::HostState;

impl Host for HostState {
    async fn touch(&mut self) -> wasmtime::Result<()> {
        self.caller.services.registry.touch(&self.caller.adapter);
        Ok(())
    }

    async fn mark_running(&mut self) -> wasmtime::Result<()> {
        self.caller
            .services
            .registry
            .mark_running(&self.caller.adapter);
        Ok(())
    }

    async fn mark_error(&mut self, message: String) -> wasmtime::Result<()> {
        let caller = &self.caller;
        caller
            .services
            .registry
            .mark_error(&caller.adapter, "AdapterError", &message);
        Ok(())
    }

    async fn status(&mut self) -> wasmtime::Result<String> {
        let entry = self.caller.services.registry.get(&self.caller.adapter);
        Ok(entry.map_or("stopped", |e| e.status.as_str()).to_owned())
    }
}
