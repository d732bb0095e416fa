//! The JSON API under `/api`, one module per resource.

mod a2a;
mod adapters;
mod agents;
pub mod api;
pub mod api_error;
mod approvals;
mod audit;
mod chat;
mod chat_turns;
mod components;
mod conversations;
mod dashboard;
mod decode;
pub mod guards;
mod health;
pub mod identity;
mod integrations;
pub mod limits;
pub mod listener;
pub mod mcp;
mod mcp_servers;
mod me;
pub mod metrics;
mod openapi;
mod recordings;
mod remote_agents;
mod request_spans;
pub mod routes;
mod run_budget;
mod runs;
mod schedules;
mod session;
mod shadows;
mod single_sign_on;
mod store;
mod tasks;
mod tokens;
mod tools;
mod traces;
mod users;
mod write_deadline;

use std::sync::Arc;

use axum::Router;
use axum::middleware;

use tokio_util::sync::CancellationToken;

use crate::a2a::RemoteAgents;
use crate::access::{Access, Permission};
use crate::adapters::Supervisor;
use crate::app::App;
use crate::bus::Bus;
use crate::db::Db;
use crate::engine::Engine;
use crate::mcp::{Agents, McpServers};
use crate::settings_store::SettingsStore;
use crate::tasks::RunningTasks;
use crate::wasm::Components;
use guards::Binding;
use routes::Routes;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub env: Arc<SettingsStore>,
    pub engine: Arc<Engine>,
    pub adapters: Arc<Supervisor>,
    pub running: Arc<RunningTasks>,
    /// Tells the other replicas of changes made here.
    pub bus: Arc<Bus>,
    /// This replica's id.
    pub replica: String,
    /// Shared outbound client (connection pool) for probes.
    pub http: reqwest::Client,
    /// Cancelled at shutdown; chat runs are its children.
    pub shutdown: CancellationToken,
    /// The MCP servers whose tools agents use, for their statuses.
    pub mcp: Arc<McpServers>,
    /// Remote agents of `[a2a]`, behind `/api/a2a/agents`.
    pub a2a: Arc<RemoteAgents>,
    /// The agents as an MCP server, behind `/mcp`.
    pub mcp_agents: Agents,
    /// Components, for the instances they use.
    pub components: Arc<Components>,
    /// How much of a conversation goes to the model with a new prompt.
    pub conversation_budget: crate::conversations::Budget,
    /// What a second message does while the first is answered.
    pub double_texting: crate::conversations::DoubleTexting,
    /// Wakes the resumer when an approval is decided here.
    pub approvals_decided: Arc<tokio::sync::Notify>,
    /// Runs schedules (the scheduler adapter, `schedule run` and the API share it).
    pub dispatcher: Arc<crate::scheduler::Dispatcher>,
    /// How the server is bound.
    pub binding: Binding,
    /// Who may call, and the credentials that say so.
    pub access: Arc<Access>,
    /// Where people reach the server: `[server] public_url`, else the address it listens on
    /// (see [`AppState::listening_on`]).
    pub public_url: Arc<str>,
    /// `[auth.oidc]`, when single sign-on is configured.
    pub oidc: Option<Arc<crate::access::single_sign_on::OidcSection>>,
    /// An outbound client that follows no redirects (the identity provider's calls).
    pub no_redirects: reqwest::Client,
    /// The streams of the runs running here, for clients that follow or re-join them.
    pub run_streams: Arc<crate::run_streams::RunStreams>,
    /// Runs' completion webhooks, checked when a run is given one.
    pub webhooks: Arc<crate::completion_webhooks::RunWebhooks>,
}

impl AppState {
    pub fn new(app: &App, binding: Binding) -> anyhow::Result<Self> {
        Ok(Self {
            binding,
            access: Arc::new(Access::new(
                app.db.clone(),
                &app.config.auth,
                binding.loopback,
            )),
            db: app.db.clone(),
            env: Arc::clone(&app.env),
            engine: Arc::clone(&app.engine),
            adapters: Arc::clone(&app.supervisor),
            running: Arc::clone(&app.running),
            bus: Arc::clone(&app.bus),
            replica: app.replica.clone(),
            shutdown: app.shutdown.clone(),
            mcp: Arc::clone(&app.mcp),
            a2a: Arc::clone(&app.a2a),
            mcp_agents: app.mcp_agents.clone(),
            components: Arc::clone(&app.components),
            conversation_budget: app.config.conversations.budget(),
            double_texting: app.config.conversations.double_texting,
            approvals_decided: Arc::clone(&app.approvals_decided),
            dispatcher: Arc::clone(&app.dispatcher),
            run_streams: Arc::new(crate::run_streams::RunStreams::new(app.config.runs)),
            webhooks: Arc::clone(&app.webhooks),
            public_url: app
                .config
                .server
                .public_url
                .as_deref()
                .unwrap_or_default()
                .trim_end_matches('/')
                .into(),
            http: reqwest::Client::builder()
                .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
                .build()?,
            oidc: app.config.auth.oidc.clone().map(Arc::new),
            no_redirects: reqwest::Client::builder()
                .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
        })
    }
}

impl AppState {
    /// Where people reach the server once it listens on `address`, unless `[server]
    /// public_url` says.
    pub fn listening_on(mut self, address: std::net::SocketAddr) -> Self {
        if self.public_url.is_empty() {
            self.public_url = format!("http://{address}").into();
        }
        self
    }

    /// The dashboard's address that uses the one-time link `secret` (in the fragment, which
    /// browsers never send to a server or a proxy's log).
    pub fn link(&self, secret: &str) -> String {
        format!("{}/#link={secret}", self.public_url)
    }
}

/// The server's routes, each with the permission its caller needs.
pub fn routes(state: &AppState) -> Routes {
    use Permission::*;
    let api = Routes::default()
        .get("/health", Open, health::show)
        // It names the version, which a stranger does not learn (as from `/api/health`).
        .get("/openapi.json", ReadStatus, openapi::show)
        .get("/me", Open, me::show)
        .post("/session", Open, session::create)
        .delete("/session", Open, session::remove)
        .post("/session/link", Open, session::with_link)
        .get("/session/oidc", Open, single_sign_on::start)
        .get("/session/oidc/callback", Open, single_sign_on::callback)
        .get("/adapters", ReadStatus, adapters::list)
        .post("/adapters/{name}/enable", ManageAdapters, adapters::enable)
        .post(
            "/adapters/{name}/disable",
            ManageAdapters,
            adapters::disable,
        )
        .get(
            "/adapters/{name}/recordings",
            ManageAdapters,
            recordings::list,
        )
        .get(
            "/adapters/{name}/recordings/{id}",
            ManageAdapters,
            recordings::show,
        )
        .get("/adapters/{name}/shadow", ManageAdapters, shadows::show)
        // Adapters' platform routes check their platform's signature.
        .any("/adapters/{name}/", Open, components::dispatch_root)
        .any("/adapters/{name}/{*rest}", Open, components::dispatch)
        .get("/schedules", ReadStatus, schedules::list)
        .post("/schedules", ManageSchedules, schedules::create)
        .get("/schedules/{name}", ReadStatus, schedules::show)
        .patch("/schedules/{name}", ManageSchedules, schedules::update)
        .delete("/schedules/{name}", ManageSchedules, schedules::remove)
        .post_run(
            "/schedules/{name}/run",
            ManageSchedules,
            schedules::run,
            state,
        )
        .get("/agents", ReadAgents, agents::list)
        .post("/agents", ManageAgents, agents::create)
        .get("/agents/{name}", ReadAgents, agents::show)
        .patch("/agents/{name}", ManageAgents, agents::update)
        .delete("/agents/{name}", ManageAgents, agents::remove)
        .get("/agents/{name}/references", ReadAgents, agents::references)
        .get("/agents/{name}/export", ReadAgents, agents::export)
        .get("/store", ReadAgents, store::list)
        .post("/store/import", ManageAgents, store::import)
        .get("/store/{slug}", ReadAgents, store::show)
        .post("/store/{slug}/install", ManageAgents, store::install)
        .post_run("/chat", Chat, chat::complete, state)
        .post_run("/chat/stream", Chat, chat::stream, state)
        // Runs: those who chat see and act on their own, manage_conversations on everyone's.
        .post_run("/runs", Chat, runs::create, state)
        .get("/runs", Chat, runs::list)
        .get("/runs/{id}", Chat, runs::show)
        .post("/runs/{id}/cancel", Chat, runs::cancel)
        .get("/runs/{id}/stream", Chat, runs::stream)
        .get("/runs/{id}/webhook", Chat, runs::webhook)
        // Conversations and their approvals: those who chat see their own, and
        // manage_conversations everyone's (each handler scopes by its caller).
        .get("/conversations", Chat, conversations::list)
        .get("/conversations/{id}", Chat, conversations::show)
        .delete("/conversations/{id}", Chat, conversations::remove)
        .get("/approvals", Chat, approvals::list)
        .post("/approvals/{id}", Chat, approvals::decide)
        // Traces hold what everyone wrote: shown without it below manage_conversations.
        .get("/traces", ReadStatus, traces::list)
        .get("/traces/{id}", ReadStatus, traces::show)
        .get("/tools", ReadStatus, tools::list)
        .get("/tasks", ReadStatus, tasks::list)
        .delete("/tasks/{task_id}", CancelTasks, tasks::remove)
        .get("/integrations", ReadStatus, integrations::list)
        .post(
            "/integrations/{id}/keys",
            ManageSettings,
            integrations::write_key,
        )
        .post(
            "/integrations/{id}/verify",
            ManageSettings,
            integrations::verify,
        )
        .get("/mcp/servers", ReadStatus, mcp_servers::list)
        .get("/a2a/agents", ReadStatus, remote_agents::list)
        .get("/users", ManageAccess, users::list)
        .post("/users", ManageAccess, users::create)
        .patch("/users/{name}", ManageAccess, users::update)
        .delete("/users/{name}", ManageAccess, users::remove)
        .post("/users/{name}/link", ManageAccess, users::link)
        .get("/tokens", ManageAccess, tokens::list)
        .post("/tokens", ManageAccess, tokens::create)
        .delete("/tokens/{name}", ManageAccess, tokens::revoke)
        .get("/audit", ManageAccess, audit::list)
        .map(|api| {
            api.route_layer(middleware::from_fn(request_spans::trace))
                .method_not_allowed_fallback(api::method_not_allowed)
        });
    let mcp = tower::ServiceBuilder::new()
        .layer(middleware::from_fn(request_spans::trace))
        .layer(middleware::from_fn(mcp::json_errors))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            run_budget::spend,
        ))
        .service(mcp::service(state));
    Routes::default()
        .nest("/api", api)
        .service("/mcp", Chat, mcp)
        // The agents over A2A: those who chat, for the agents they may use.
        .get("/a2a/{agent}/.well-known/agent-card.json", Chat, a2a::card)
        .post_run("/a2a/{agent}", Chat, a2a::rpc, state)
        .get("/metrics", ReadStatus, metrics::show)
        .get("/", Open, dashboard::index)
        .get("/assets/{file}", Open, dashboard::asset)
}

pub fn router(state: AppState, limits: limits::Limits) -> Router {
    let binding = state.binding;
    let (routes, declared) = routes(&state).into_parts();
    let document = openapi::document(&declared, state.access.sign_in_required());
    routes
        .route_layer(middleware::from_fn_with_state(state.clone(), audit::record))
        .layer(axum::Extension(document))
        .fallback(api::not_found)
        .layer(middleware::from_fn_with_state(limits, limits::read_body))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            identity::identify,
        ))
        .layer(middleware::from_fn_with_state(
            binding,
            guards::browser_guard,
        ))
        .with_state(state)
}
