//! `tools`: the tool registry, limited to granted tools. A tool that runs agents needs the
//! `agent` grant too and counts against the adapter's agent limits; called while the adapter
//! serves an agent's tool call, it continues that run's depth and budget.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};
use service_contract::tools::ToolContext;
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::agent::Refusal;
use super::{Capability, link_versions, on_host};
use latest::service::adapter::types::ToolSpec;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Tool names; `*` grants every tool but gated, writing and named-only (MCP) ones, which
    /// must be named.
    #[serde(default)]
    tools: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    /// `*`: every tool that need not be named.
    pub all: bool,
    /// The tools the grant names.
    pub named: BTreeSet<String>,
    /// A 0.1 component's own list of the tools it wants, which it never gets past (`None`:
    /// it lists none, or `*`).
    pub listed: Option<BTreeSet<String>>,
}

impl Granted {
    /// Whether the grant covers a tool. A tool that `must_be_named` (gated, or writing stored
    /// data) is covered only by its name, never through `*`.
    pub fn allows(&self, name: &str, must_be_named: bool) -> bool {
        self.listed
            .as_ref()
            .is_none_or(|listed| listed.contains(name))
            && (self.named.contains(name) || (self.all && !must_be_named))
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
            return Ok(Granted::default());
        }
        let star = |list: &[String]| list.iter().any(|t| t == "*");
        Ok(Granted {
            all: star(&grant.tools),
            named: grant.tools.iter().filter(|t| *t != "*").cloned().collect(),
            // A 0.1 component lists the tools it wants, or `*`.
            listed: request
                .listed
                .as_ref()
                .filter(|listed| !star(&listed.tools))
                .map(|listed| listed.tools.iter().cloned().collect()),
        })
    }

    fn granted_anything(granted: &Granted) -> bool {
        match &granted.listed {
            None => granted.all || !granted.named.is_empty(),
            Some(listed) => listed
                .iter()
                .any(|t| granted.all || granted.named.contains(t)),
        }
    }

    fn summary(granted: &Granted) -> Vec<String> {
        let named = |t: &String| format!("tool:{t}");
        match &granted.listed {
            None => granted
                .all
                .then(|| "tools:*".to_owned())
                .into_iter()
                .chain(granted.named.iter().map(named))
                .collect(),
            Some(listed) => listed
                .iter()
                .filter(|t| granted.all || granted.named.contains(*t))
                .map(named)
                .collect(),
        }
    }

    fn state(_: &Granted) -> anyhow::Result<()> {
        Ok(())
    }

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
    /// Whether the adapter's grant covers `name`: gated tools only when named and switched
    /// on, writing and named-only tools only when named.
    fn tool_granted(&self, name: &str) -> bool {
        let (services, granted) = (&self.caller.services, &self.caller.granted.tools);
        match services.tools.gate_of(name) {
            Some(gate) => {
                granted.allows(name, true) && services.env.get(gate).as_deref() == Some("true")
            }
            None => granted.allows(
                name,
                services.tools.writes(name) || services.tools.named_only(name),
            ),
        }
    }
}

impl latest::service::adapter::tools::Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Vec<ToolSpec>> {
        let args = self.args(|| Value::Null);
        if let Some(answer) = self.replayed("tools.list", &args)? {
            return Ok(answer);
        }
        let specs: Vec<ToolSpec> = self
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
            .collect();
        self.taped("tools.list", args, &specs);
        Ok(specs)
    }

    async fn invoke(
        &mut self,
        name: String,
        args_json: String,
    ) -> wasmtime::Result<Result<String, String>> {
        let args = self.args(|| json!({"name": name, "args_json": args_json}));
        if let Some(answer) = self.replayed("tools.invoke", &args)? {
            return Ok(answer);
        }
        let answer = self.invoke_now(name, args_json).await;
        self.taped("tools.invoke", args, &answer);
        Ok(answer)
    }
}

impl HostState {
    async fn invoke_now(&mut self, name: String, args_json: String) -> Result<String, String> {
        self.heavy(name.len() + args_json.len()).await;
        let caller = self.caller.clone();
        if !self.tool_granted(&name) {
            caller.deny(&format!("tool {name:?} is not granted"));
            return Err(format!("tool {name:?} is not granted"));
        }
        let slot = match caller.services.tools.runs_agents(&name) {
            false => None,
            true => match self.agent_slot(&format!("tool {name:?} runs agents")).await {
                Ok(slot) => Some(slot),
                Err(Refusal::Denied(m) | Refusal::Limited(m)) => return Err(m),
            },
        };
        let input = match serde_json::from_str(&args_json) {
            Ok(input) => input,
            Err(e) => return Err(format!("arguments are not JSON: {e}")),
        };
        let context = ToolContext {
            agents: caller.services.agents.clone(),
            run: self.run.clone(),
            cancel: self.cancel.child_token(),
        };
        on_host(self, async move {
            let answer = caller.services.tools.invoke(&name, input, context).await;
            drop(slot);
            answer
        })
        .await
    }
}

impl v0_1::service::adapter::tools::Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Vec<v0_1::service::adapter::types::ToolSpec>> {
        let specs = latest::service::adapter::tools::Host::list(self).await?;
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
        latest::service::adapter::tools::Host::invoke(self, name, args_json).await
    }
}
