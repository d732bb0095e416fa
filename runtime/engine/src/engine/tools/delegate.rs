//! `delegate_to_agent`: runs another profile on a sub-task. The child run gets its own trace,
//! linked to the caller's, and delegation depth is bounded.

use serde::Deserialize;
use serde_json::json;

use service_contract::agent::{ProfileChoice, RunRequest};
use service_contract::tools::{RegistryError, Tool, ToolContext, ToolRegistry, args};

use crate::engine::MAX_DELEGATION_DEPTH;

#[derive(Deserialize)]
struct Delegate {
    agent: String,
    prompt: String,
}

pub(super) fn register(registry: &ToolRegistry) -> Result<(), RegistryError> {
    registry.register(
        Tool::new(
            "delegate_to_agent",
            "Hands a self-contained sub-task to another agent profile by name and returns its \
             answer.",
            json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "minLength": 1, "description": "Exact profile name"},
                    "prompt": {"type": "string", "minLength": 1, "description": "Everything the other agent needs to know"}
                },
                "required": ["agent", "prompt"],
                "additionalProperties": false
            }),
            |input, ctx: ToolContext| async move {
                let Delegate { agent, prompt } = args(input)?;
                let parent = ctx.run.as_ref().map(|run| run.child());
                if parent.as_ref().is_some_and(|p| p.depth > MAX_DELEGATION_DEPTH) {
                    return Err(format!(
                        "delegation depth limit ({MAX_DELEGATION_DEPTH}) reached; answer yourself"
                    ));
                }
                let mut request =
                    RunRequest::new(prompt, ProfileChoice::Required(agent), "delegate");
                request.parent = parent;
                let reply = ctx
                    .agents
                    .run(request, ctx.cancel.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "answer": reply.text, "trace_id": reply.trace_id }).to_string())
            },
        )
        .running_agents(),
        false,
    )
}
