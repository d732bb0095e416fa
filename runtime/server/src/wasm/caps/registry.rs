//! `registry`: the adapter's own registry entry. Always available.

use service_contract::FailureKind;
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::{Capability, Nothing, link_versions};

pub struct Registry;

impl Capability for Registry {
    const INTERFACE: &'static str = "registry";
    const KEYS: &'static [&'static str] = &[];
    const LIMIT_KEYS: &'static [LimitKey] = &[];
    type Grant = Nothing;
    type Granted = ();
    type State = ();

    fn grant(_: &Request, _: &Nothing, _: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        Ok(())
    }

    fn granted_anything(_: &()) -> bool {
        true
    }

    fn summary(_: &()) -> Vec<String> {
        Vec::new()
    }

    fn state(_: &()) -> anyhow::Result<()> {
        Ok(())
    }

    fn suggest(_: &Request) -> Vec<String> {
        Vec::new()
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, registry)
    }
}

impl latest::service::adapter::registry::Host for HostState {
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
        self.heavy(message.len()).await;
        self.caller.record(FailureKind::AdapterError, &message);
        Ok(())
    }

    async fn status(&mut self) -> wasmtime::Result<String> {
        let entry = self.caller.services.registry.get(&self.caller.adapter);
        Ok(entry.map_or("stopped", |e| e.status.as_str()).to_owned())
    }
}

impl v0_1::service::adapter::registry::Host for HostState {
    async fn touch(&mut self) -> wasmtime::Result<()> {
        latest::service::adapter::registry::Host::touch(self).await
    }

    async fn mark_running(&mut self) -> wasmtime::Result<()> {
        latest::service::adapter::registry::Host::mark_running(self).await
    }

    async fn mark_error(&mut self, message: String) -> wasmtime::Result<()> {
        latest::service::adapter::registry::Host::mark_error(self, message).await
    }

    async fn status(&mut self) -> wasmtime::Result<String> {
        latest::service::adapter::registry::Host::status(self).await
    }
}
