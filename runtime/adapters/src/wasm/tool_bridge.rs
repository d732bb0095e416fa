//! Tools components offer (`tool-provider`), registered in the tool registry while they are
//! loaded. A component offers at most [`MAX_TOOLS`], each with a bounded description and
//! schema, so no adapter can swell every model request. A tool of a component granted `agent`
//! runs agents, so a caller needs the `agent` grant too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use service_contract::{FailureKind, Tool, ToolContext, ToolRegistry};

use super::generation::Generation;
use crate::adapters::Supervisor;

pub(crate) const MAX_TOOLS: usize = 16;
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1_024;
pub(crate) const MAX_SCHEMA_BYTES: usize = 8 << 10;

pub struct ToolBridge {
    registry: Arc<ToolRegistry>,
    supervisor: Weak<Supervisor>,
    /// Tools each adapter registered, removed again when it unloads.
    owned: Mutex<HashMap<String, Vec<String>>>,
}

impl ToolBridge {
    pub fn new(registry: Arc<ToolRegistry>, supervisor: Weak<Supervisor>) -> Self {
        Self {
            registry,
            supervisor,
            owned: Mutex::default(),
        }
    }

    /// Registers the tools `generation` offers, replacing those of the version before it.
    pub async fn register(&self, generation: &Arc<Generation>) {
        let name = generation.name.clone();
        self.unregister(&name);
        let prepared = generation.prepared();
        if !prepared.exports.has_tools() {
            return;
        }
        let caller = &prepared.caller;
        let offered = match generation.list_tools().await {
            Ok(offered) => offered,
            Err(e) => {
                caller.record(&e.kind, &format!("list-tools: {}", e.message));
                return;
            }
        };
        if offered.len() > MAX_TOOLS {
            caller.record(
                FailureKind::ToolError,
                &format!(
                    "it offers {} tools; the first {MAX_TOOLS} are registered",
                    offered.len()
                ),
            );
        }
        let runs_agents = caller.granted.agent.allowed;
        let mut owned = Vec::new();
        for spec in offered.into_iter().take(MAX_TOOLS) {
            let registered = self
                .tool(
                    generation,
                    &spec.name,
                    &spec.description,
                    &spec.parameters_json,
                )
                .map(|tool| {
                    if runs_agents {
                        tool.running_agents()
                    } else {
                        tool
                    }
                })
                .and_then(|tool| {
                    self.registry
                        .register(tool, false)
                        .map_err(|e| e.to_string())
                });
            match registered {
                Ok(()) => owned.push(spec.name),
                Err(e) => caller.record(FailureKind::ToolError, &e),
            }
        }
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name, owned);
    }

    /// A registry tool that calls `generation` while its adapter serves.
    fn tool(
        &self,
        generation: &Arc<Generation>,
        tool: &str,
        description: &str,
        parameters_json: &str,
    ) -> Result<Tool, String> {
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(format!(
                "tool {tool}: its description is longer than {MAX_DESCRIPTION_CHARS} characters"
            ));
        }
        if parameters_json.len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "tool {tool}: its parameters schema is larger than {MAX_SCHEMA_BYTES} bytes"
            ));
        }
        let parameters = serde_json::from_str(parameters_json)
            .map_err(|e| format!("tool {tool}: parameters are not JSON: {e}"))?;
        let (generation, supervisor) = (Arc::downgrade(generation), self.supervisor.clone());
        let tool_name = tool.to_owned();
        let handler = move |input: serde_json::Value, ctx: ToolContext| {
            let (generation, supervisor, tool) =
                (generation.clone(), supervisor.clone(), tool_name.clone());
            async move {
                let generation = generation
                    .upgrade()
                    .ok_or("the adapter offering this tool was replaced or removed")?;
                let serving = supervisor
                    .upgrade()
                    .is_some_and(|s| s.is_serving(&generation.name));
                if !serving {
                    return Err(format!("adapter {:?} is not running", generation.name));
                }
                generation.call_tool(tool, input.to_string(), ctx.run).await
            }
        };
        Ok(Tool::new(tool, description, parameters, handler))
    }

    /// Removes the tools an adapter registered.
    pub(crate) fn unregister(&self, adapter: &str) {
        let owned = self
            .owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(adapter);
        for tool in owned.into_iter().flatten() {
            self.registry.unregister(&tool);
        }
    }
}
