//! `tools`: the tool registry, limited to granted tools. A tool that runs agents needs the
//! `agent` grant too and counts against the adapter's agent limits; called while the adapter
//! serves an agent's tool call, it continues that run's depth and budget.

use std::collections::BTreeSet;

use serde::Deserialize;
use service_contract::tools::ToolContext;
use wasmtime::component::Linker;

use super::super::bindings::{v0_1, v0_2};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::agent::Refusal;
use super::{Capability, link_versions, on_host};
use v0_2::service::adapter::types::ToolSpec;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Tool names; `*` grants every tool but gated ones, which must be named.
    #[serde(default)]
    tools: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    /// `None`: every ungated tool.
    pub names: Option<BTreeSet<String>>,
}

impl Granted {
    /// Whether the grant covers a tool; a gated tool (`gate` is its variable) must be named
    /// explicitly, never through `*`, and `gate_open` must say its variable is `true`.
    pub fn allows(&self, name: &str, gate: Option<&str>, gate_open: impl Fn(&str) -> bool) -> bool {
        match gate {
            None => self.names.as_ref().is_none_or(|t| t.contains(name)),
            Some(gate) => self.names.as_ref().is_some_and(|t| t.contains(name)) && gate_open(gate),
        }
    }
}

pub struct Tools;

impl Capability for Tools {
    const INTERFACE: &'static str = "tools";
    const KEYS: &'static [&'static str] = &["tools"];
    const LIMIT_KEYS: &'static [LimitKey] = &[];
    type Grant = Grant;
    type Granted = Granted;
    type State = ();

    fn grant(
        request: &Request,
        grant: &Grant,
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Granted, String> {
        if !request.imports.contains(Self::INTERFACE) {
            return Ok(Granted {
                names: Some(BTreeSet::new()),
            });
        }
        let all = |list: &[String]| list.iter().any(|t| t == "*");
        let granted = |t: &String| all(&grant.tools) || grant.tools.contains(t);
        let names = match &request.listed {
            // A 0.1 component lists the tools it wants, or `*`.
            Some(listed) if !all(&listed.tools) => Some(
                listed
                    .tools
                    .iter()
                    .filter(|t| granted(t))
                    .cloned()
                    .collect(),
            ),
            _ if all(&grant.tools) => None,
            _ => Some(grant.tools.iter().cloned().collect()),
        };
        Ok(Granted { names })
    }

    fn granted_anything(granted: &Granted) -> bool {
        granted.names.as_ref().is_none_or(|t| !t.is_empty())
    }

    fn summary(granted: &Granted) -> Vec<String> {
        match &granted.names {
            None => vec!["tools:*".into()],
            Some(names) => names.iter().map(|t| format!("tool:{t}")).collect(),
        }
    }

    fn state(_: &Granted) {}

    fn suggest(request: &Request) -> Vec<String> {
        let listed = request.listed.as_ref().map(|l| l.tools.clone());
        let names = listed
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| vec!["*".into()]);
        vec![format!("tools = {names:?}")]
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, tools)
    }
}

impl HostState {
    /// Whether the adapter's grant covers `name` (gated tools only when named and switched on).
    fn tool_granted(&self, name: &str) -> bool {
        let services = &self.caller.services;
        self.caller
            .granted
            .tools
            .allows(name, services.tools.gate_of(name), |gate| {
                services.env.get(gate).as_deref() == Some("true")
            })
    }
}

impl v0_2::service::adapter::tools::Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Vec<ToolSpec>> {
        Ok(self
            .caller
            .services
            .tools
            .list()
            .into_iter()
            .filter(|t| self.tool_granted(&t.name))
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
        if !self.tool_granted(&name) {
            caller.deny(&format!("tool {name:?} is not granted"));
            return Ok(Err(format!("tool {name:?} is not granted")));
        }
        let slot = match caller.services.tools.runs_agents(&name) {
            false => None,
            true => match self.agent_slot(&format!("tool {name:?} runs agents")).await {
                Ok(slot) => Some(slot),
                Err(Refusal::Denied(m) | Refusal::Limited(m)) => return Ok(Err(m)),
            },
        };
        let input = match serde_json::from_str(&args_json) {
            Ok(input) => input,
            Err(e) => return Ok(Err(format!("arguments are not JSON: {e}"))),
        };
        let context = ToolContext {
            agents: caller.services.agents.clone(),
            run: self.run.clone(),
            cancel: self.cancel.child_token(),
        };
        Ok(on_host(self, async move {
            let answer = caller.services.tools.invoke(&name, input, context).await;
            drop(slot);
            answer
        })
        .await)
    }
}

impl v0_1::service::adapter::tools::Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Vec<v0_1::service::adapter::types::ToolSpec>> {
        let specs = v0_2::service::adapter::tools::Host::list(self).await?;
        Ok(specs
            .into_iter()
            .map(|t| v0_1::service::adapter::types::ToolSpec {
                name: t.name,
                description: t.description,
                parameters_json: t.parameters_json,
            })
            .collect())
    }

    async fn invoke(
        &mut self,
        name: String,
        args_json: String,
    ) -> wasmtime::Result<Result<String, String>> {
        v0_2::service::adapter::tools::Host::invoke(self, name, args_json).await
    }
}
