//! The JSON API under `/api`, one module per resource.

mod adapters;
mod agents;
pub mod api;
pub mod api_error;
mod approvals;
mod chat;
mod chat_turns;
mod components;
mod conversations;
mod dashboard;
mod decode;
pub mod guards;
mod health;
mod integrations;
pub mod limits;
pub mod listener;
pub mod mcp;
mod mcp_servers;
pub mod metrics;
mod request_spans;
mod schedules;
mod store;
mod tasks;
mod tools;
mod traces;
mod write_deadline;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use axum::routing::{any, delete, get, post};

use tokio_util::sync::CancellationToken;

use crate::adapters::Supervisor;
use crate::app::App;
use crate::bus::Bus;
use crate::db::Db;
use crate::engine::Engine;
use crate::mcp::{Agents, McpServers};
use crate::settings_store::SettingsStore;
use crate::tasks::RunningTasks;
use crate::wasm::Components;

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
}

impl AppState {
    pub fn new(app: &App) -> anyhow::Result<Self> {
        Ok(Self {
            db: app.db.clone(),
            env: Arc::clone(&app.env),
            engine: Arc::clone(&app.engine),
            adapters: Arc::clone(&app.supervisor),
            running: Arc::clone(&app.running),
            bus: Arc::clone(&app.bus),
            replica: app.replica.clone(),
            shutdown: app.shutdown.clone(),
            mcp: Arc::clone(&app.mcp),
            mcp_agents: app.mcp_agents.clone(),
            components: Arc::clone(&app.components),
            conversation_budget: app.config.conversations.budget(),
            double_texting: app.config.conversations.double_texting,
            approvals_decided: Arc::clone(&app.approvals_decided),
            dispatcher: Arc::clone(&app.dispatcher),
            http: reqwest::Client::builder()
                .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
                .build()?,
        })
    }
}

pub fn router(state: AppState, binding: guards::Binding, limits: limits::Limits) -> Router {
    let api = Router::new()
        .route("/health", get(health::show))
        .route("/adapters", get(adapters::list))
        .route("/adapters/{name}/enable", post(adapters::enable))
        .route("/adapters/{name}/disable", post(adapters::disable))
        .route("/adapters/{name}/", any(components::dispatch_root))
        .route("/adapters/{name}/{*rest}", any(components::dispatch))
        .route("/schedules", get(schedules::list).post(schedules::create))
        .route(
            "/schedules/{name}",
            get(schedules::show)
                .patch(schedules::update)
                .delete(schedules::remove),
        )
        .route("/schedules/{name}/run", post(schedules::run))
        .route("/agents", get(agents::list).post(agents::create))
        .route(
            "/agents/{name}",
            get(agents::show)
                .patch(agents::update)
                .delete(agents::remove),
        )
        .route("/agents/{name}/references", get(agents::references))
        .route("/agents/{name}/export", get(agents::export))
        .route("/store", get(store::list))
        .route("/store/import", post(store::import))
        .route("/store/{slug}", get(store::show))
        .route("/store/{slug}/install", post(store::install))
        .route("/chat", post(chat::complete))
        .route("/chat/stream", post(chat::stream))
        .route("/conversations", get(conversations::list))
        .route("/approvals", get(approvals::list))
        .route("/approvals/{id}", post(approvals::decide))
        .route(
            "/conversations/{id}",
            get(conversations::show).delete(conversations::remove),
        )
        .route("/tools", get(tools::list))
        .route("/tasks", get(tasks::list))
        .route("/tasks/{task_id}", delete(tasks::remove))
        .route("/traces", get(traces::list))
        .route("/traces/{id}", get(traces::show))
        .route("/integrations", get(integrations::list))
        .route("/integrations/{id}/keys", post(integrations::write_key))
        .route("/integrations/{id}/verify", post(integrations::verify))
        .route("/mcp/servers", get(mcp_servers::list))
        .route_layer(middleware::from_fn(request_spans::trace))
        .method_not_allowed_fallback(api::method_not_allowed);
    let mcp = Router::new()
        .nest_service("/mcp", mcp::service(&state))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            mcp::authorize,
        ))
        .layer(middleware::from_fn(request_spans::trace));
    Router::new()
        .nest("/api", api)
        .merge(mcp)
        .route("/metrics", get(metrics::show))
        .merge(dashboard::router())
        .fallback(api::not_found)
        .layer(middleware::from_fn_with_state(limits, limits::read_body))
        .layer(middleware::from_fn_with_state(
            binding,
            guards::browser_guard,
        ))
        .with_state(state)
}
