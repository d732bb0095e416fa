//! `tools`: the tool registry, limited to granted tools.

use service_contract::tools::ToolContext;

use super::super::bindings::service::adapter::tools::Host;
use super::super::bindings::types::ToolSpec;
use super::super::state::{Caller, HostState};

/// Whether the adapter's grant covers `name` (gated tools only when named and switched on).
fn granted(caller: &Caller, name: &str) -> bool {
    let services = &caller.services;
    caller
        .effective
        .allows_tool(name, services.tools.gate_of(name), |gate| {
            services.env.get(gate).as_deref() == Some("true")
        })
}

impl Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Vec<ToolSpec>> {
        let caller = self.caller.clone();
        Ok(caller
            .services
            .tools
            .list()
            .into_iter()
            .filter(|t| granted(&caller, &t.name))
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                parameters_json: t.parameters.to_string(),
            })
            .collect())
    }

    async fn invoke(
        &mut self,
        name: String,
        args_json: String,
    ) -> wasmtime::Result<Result<String, String>> {
        let caller = self.caller.clone();
        if !granted(&caller, &name) {
            caller.deny(&format!("tool {name:?} is not granted"));
            return Ok(Err(format!("tool {name:?} is not granted")));
        }
        let input = match serde_json::from_str(&args_json) {
            Ok(input) => input,
            Err(e) => return Ok(Err(format!("arguments are not JSON: {e}"))),
        };
        let context = ToolContext {
            agents: caller.services.agents.clone(),
            trace_id: None,
            depth: 0,
            cancel: self.cancel.child_token(),
        };
        let tools = caller.services.tools.clone();
        Ok(tools.invoke(&name, input, context).await)
    }
}
