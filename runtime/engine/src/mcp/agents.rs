//! This runtime as an MCP server: one tool per agent profile (`ask_<name>`: a prompt, and a
//! conversation to continue if the client has one, in; the answer out, with its trace and
//! conversation ids as structured output), plus the registry tools the operator
//! lists in `[mcp_server] tools` (never a gated one). Each agent run is a task with a trace,
//! like every other run; a client that cancels its request cancels the run.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use futures_util::future::BoxFuture;
use http::{Request, Response};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};
use service_contract::agent::{ProfileChoice, RunFailure, RunReply, RunRequest, Turn};
use service_contract::tools::{ToolContext, ToolRegistry};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
use tracing::Instrument;

use super::connection::identity;
use super::tools;
use crate::access::{Caller, Principal};
use crate::agents::profiles;
use crate::conversations;
use crate::db::Db;
use crate::task_runs::{AgentTasks, NewRun};
use crate::telemetry::{TARGET, propagation};

/// Where the runs it starts say they came from.
pub const SOURCE: &str = "mcp";

/// The agents as an HTTP service, for `/mcp`.
pub type HttpService = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// The MCP server's state, shared by every session (each gets a clone).
#[derive(Clone)]
pub struct Agents(Arc<Inner>);

struct Inner {
    db: Db,
    tasks: AgentTasks,
    registry: Arc<ToolRegistry>,
    /// `[mcp_server] tools`.
    offered: Vec<String>,
    /// Cancelled at shutdown; runs are its children.
    shutdown: CancellationToken,
    /// How much of a conversation a continued ask sends the model.
    budget: conversations::Budget,
}

/// What a tool name stands for.
enum Target {
    Agent(String),
    Tool(String),
}

impl Agents {
    pub fn new(
        db: Db,
        tasks: AgentTasks,
        registry: Arc<ToolRegistry>,
        offered: Vec<String>,
        shutdown: CancellationToken,
        budget: conversations::Budget,
    ) -> Self {
        Self(Arc::new(Inner {
            db,
            tasks,
            registry,
            offered,
            shutdown,
            budget,
        }))
    }

    /// The agents over MCP's Streamable HTTP transport, each request served on its own (no
    /// session state, so any replica can take any request), ended at shutdown. Boxed here, so
    /// the protocol's machinery is compiled once, in this crate, not again in the HTTP API's.
    pub fn http_service(&self) -> HttpService {
        let agents = self.clone();
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            // Host and Origin are checked by the HTTP API's browser guard, for every route alike.
            .disable_allowed_hosts()
            .with_cancellation_token(self.0.shutdown.child_token());
        let service = StreamableHttpService::new(
            move || Ok(agents.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        BoxCloneSyncService::new(ServiceExt::<Request<Body>>::map_response(
            service,
            |answer| answer.map(Body::new),
        ))
    }

    /// Serves one MCP client on stdin and stdout until it ends the session. Boxed for the
    /// same reason as [`Agents::http_service`].
    pub fn serve_stdio(self) -> BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(async move {
            let session = self
                .serve(rmcp::transport::stdio())
                .await
                .map_err(|e| anyhow::anyhow!("the MCP client did not start a session: {e}"))?;
            session.waiting().await?;
            Ok(())
        })
    }

    /// Every tool offered now to `caller`, with what it stands for: the agents they may use,
    /// then the registry's tools.
    async fn catalogue(
        &self,
        caller: Option<&Principal>,
    ) -> Result<Vec<(Tool, Target)>, ErrorData> {
        let profiles = self
            .0
            .db
            .call(|conn| profiles::list(conn))
            .await
            .map_err(|e| ErrorData::internal_error(format!("cannot list the agents: {e}"), None))?;
        let mut tools: Vec<(Tool, Target)> = Vec::new();
        let usable = |profile: &profiles::Profile| {
            caller.is_none_or(|caller| caller.may_use(profile.access.as_ref()))
        };
        for profile in profiles.into_iter().filter(usable) {
            let name = unique(&tools, tool_name(&profile.name));
            let about = match profile.description.trim() {
                "" => String::new(),
                description => format!(" ({description})"),
            };
            let tool = Tool::new(
                name,
                format!(
                    "Ask the agent {:?}{about} of this service-runtime. It works with its own \
                     persona, model and tools and answers in text; the run is recorded as a \
                     task and a trace.",
                    profile.name
                ),
                object(json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "description": "What to ask the agent"},
                        "conversation_id": {
                            "type": "string",
                            "description": "Continues this conversation (from an earlier answer); a new one starts without it",
                        },
                    },
                    "required": ["prompt"],
                })),
            )
            .with_title(profile.name.clone())
            .with_raw_output_schema(Arc::new(object(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "trace_id": {"type": "string"},
                    "task_id": {"type": "string"},
                    "conversation_id": {"type": "string"},
                },
                "required": ["text", "trace_id"],
            }))));
            tools.push((tool, Target::Agent(profile.name)));
        }
        let registered = self.0.registry.list();
        for info in registered
            .into_iter()
            .filter(|info| self.0.offered.contains(&info.name) && !info.gated)
        {
            let Value::Object(schema) = info.parameters else {
                continue;
            };
            let name = unique(&tools, info.name.clone());
            tools.push((
                Tool::new(name, info.description, schema),
                Target::Tool(info.name),
            ));
        }
        Ok(tools)
    }

    async fn ask(
        &self,
        profile: String,
        arguments: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let prompt = arguments
            .get("prompt")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| ErrorData::invalid_params("prompt must be a non-empty string", None))?
            .to_owned();
        let client = context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .unwrap_or_else(|| "an MCP client".to_owned());
        let wanted = arguments
            .get("conversation_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let caller = caller(context);
        let started_by = caller.as_ref().map(Principal::label);
        let opened = self.conversation(&profile, &prompt, wanted, caller).await;
        let (conversation, history) = match opened {
            Ok(opened) => opened,
            Err(refusal) => return Ok(CallToolResult::error(vec![ContentBlock::text(refusal)])),
        };
        let new = NewRun {
            title: prompt.clone(),
            description: format!("asked over MCP by {client}"),
            profile: profile.clone(),
            may_pause: false,
        };
        let request = RunRequest {
            history,
            started_by,
            ..RunRequest::new(prompt.clone(), ProfileChoice::Required(profile), SOURCE)
        };
        let cancel = self.0.shutdown.child_token();
        // A client that cancels (or goes away) cancels the run; the task records it.
        let _cancel_when_dropped = cancel.clone().drop_guard();
        let run = self.0.tasks.as_task_of(new, None, request, cancel.clone());
        let (task_id, result) = tokio::select! {
            done = run => done,
            () = context.ct.cancelled() => {
                cancel.cancel();
                return Err(ErrorData::internal_error("the request was cancelled", None));
            }
        };
        self.record(&conversation, prompt, &result).await;
        Ok(match result {
            Ok(reply) => {
                let mut answer =
                    CallToolResult::success(vec![ContentBlock::text(reply.text.clone())]);
                answer.structured_content = Some(json!({
                    "text": reply.text,
                    "trace_id": reply.trace_id,
                    "task_id": task_id,
                    "conversation_id": conversation,
                }));
                answer
            }
            Err(failure) => {
                let trace = failure
                    .trace_id
                    .map(|id| format!(" (trace {id})"))
                    .unwrap_or_default();
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "{}{trace}",
                    failure.message
                ))])
            }
        })
    }

    /// The conversation an ask continues (`wanted`; an error for the client when it is unknown,
    /// another agent's, or someone else's the caller may not enter) with its latest messages,
    /// or a new one started by the caller.
    async fn conversation(
        &self,
        agent: &str,
        prompt: &str,
        wanted: Option<String>,
        caller: Option<Principal>,
    ) -> Result<(String, Vec<Turn>), String> {
        let (agent, prompt, budget) = (agent.to_owned(), prompt.to_owned(), self.0.budget);
        let opened = self
            .0
            .db
            .call(move |conn| {
                let by = caller.as_ref().map(Principal::label);
                let Some(id) = wanted else {
                    let started =
                        conversations::start(conn, &agent, SOURCE, &prompt, by.as_deref())?;
                    return Ok(Ok((started.id, Vec::new())));
                };
                let entered = |found: &conversations::Conversation| {
                    caller
                        .as_ref()
                        .is_none_or(|caller| caller.may_enter(found.started_by.as_deref()))
                };
                Ok(match conversations::get(conn, &id)? {
                    None => Err(format!("no conversation {id:?}")),
                    Some(found) if !entered(&found) => Err(format!(
                        "conversation {id:?} was started by someone else; continuing it needs \
                         the permission manage_conversations"
                    )),
                    Some(found) if found.agent != agent => Err(format!(
                        "conversation {id:?} is with agent {:?}: ask that agent's tool",
                        found.agent
                    )),
                    Some(_) => Ok((id.clone(), conversations::history(conn, &id, budget)?)),
                })
            })
            .await;
        opened.map_err(|e| format!("cannot open the conversation: {e}"))?
    }

    /// Keeps the exchange in its conversation: the prompt always, the answer when there is one.
    async fn record(&self, id: &str, prompt: String, result: &Result<RunReply, RunFailure>) {
        let (id, answer, trace_id) = match result {
            Ok(reply) => (
                id.to_owned(),
                Some(reply.text.clone()),
                Some(reply.trace_id.clone()),
            ),
            Err(failure) => (id.to_owned(), None, failure.trace_id.clone()),
        };
        let recorded = self
            .0
            .db
            .call(move |conn| {
                conversations::record(
                    conn,
                    &id,
                    &conversations::Exchange {
                        prompt: &prompt,
                        answer: answer.as_deref(),
                        tool_calls: None,
                        trace_id: trace_id.as_deref(),
                        leaving: None,
                    },
                )
            })
            .await;
        if let Err(e) = recorded {
            tracing::warn!("cannot record an MCP exchange in its conversation: {e}");
        }
    }

    async fn call(
        &self,
        tool: String,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let ctx = ToolContext {
            agents: Arc::clone(&self.0.tasks.agents),
            run: None,
            cancel: context.ct.child_token(),
        };
        match self
            .0
            .registry
            .invoke(&tool, Value::Object(arguments), ctx)
            .await
        {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error)]),
        }
    }
}

impl ServerHandler for Agents {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(identity())
            .with_instructions(
                "Each ask_<agent> tool runs one agent of this service-runtime on a prompt and \
                 answers with its reply; the structured result names the run's trace.",
            )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .catalogue(caller(&context).as_ref())
            .await?
            .into_iter()
            .map(|(tool, _)| tool)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let target = self
            .catalogue(caller(&context).as_ref())
            .await?
            .into_iter()
            .find(|(tool, _)| tool.name == request.name)
            .map(|(_, target)| target)
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("unknown tool {:?}", request.name), None)
            })?;
        let span = tracing::info_span!(
            target: TARGET,
            "mcp_call",
            otel.name = %format!("tools/call {}", request.name),
            otel.kind = "server",
            "mcp.method.name" = "tools/call",
            gen_ai.tool.name = %request.name,
        );
        // The client's context comes in `_meta` (MCP's SEP-414).
        let carrier: HashMap<String, String> = [
            ("traceparent", context.meta.get_traceparent()),
            ("tracestate", context.meta.get_tracestate()),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_owned(), value?.to_owned())))
        .collect();
        propagation::follow(&span, &carrier);
        let arguments = request.arguments.unwrap_or_default();
        let result = async {
            Ok::<_, ErrorData>(match target {
                Target::Agent(profile) => self.ask(profile, &arguments, &context).await?,
                Target::Tool(tool) => self.call(tool, arguments, &context).await,
            })
        }
        .instrument(span)
        .await?;
        Ok(result.into())
    }
}

/// Who called: the identity the server's middleware put on the HTTP request.
fn caller(context: &RequestContext<RoleServer>) -> Option<Principal> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| match parts.extensions.get::<Caller>() {
            Some(Caller::Known(principal)) => Some(principal.clone()),
            _ => None,
        })
}

/// `ask_<name>`, with what a tool name cannot hold as `_`.
fn tool_name(profile: &str) -> String {
    let name: String = tools::plain(profile).chars().take(100).collect();
    format!("ask_{name}")
}

/// `name`, or `name_2`, `name_3`... when an earlier tool took it.
fn unique(tools: &[(Tool, Target)], name: String) -> String {
    let taken = |candidate: &str| tools.iter().any(|(tool, _)| tool.name == candidate);
    if !taken(&name) {
        return name;
    }
    (2..)
        .map(|n| format!("{name}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or(name)
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}
