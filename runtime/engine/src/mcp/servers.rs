//! The configured MCP servers, kept connected: each is (re)started with backoff, its tools
//! registered as `mcp__<server>__<tool>` and re-registered when it says they changed, its state
//! shown on its status. Tools stay registered while their server reconnects, answering with
//! an error that says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::service::Peer;
use serde::Serialize;
use serde_json::Value;
use service_contract::tools::{Tool, ToolContext, ToolRegistry};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::connection::Connection;
use super::settings::{McpSection, Server};
use super::tools;
use crate::db;
use crate::kept::{self, Keepers, Shown};
use crate::settings_store::SettingsStore;
use crate::telemetry::propagation;

/// Pauses between restarts double from the first to the last; a server that stayed up for
/// the last one starts again from the first.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LAST_PAUSE: Duration = Duration::from_secs(60);

/// A server as `GET /api/mcp/servers` shows it.
pub use crate::kept::State;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = McpServerStatus)]
pub struct Status {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    pub state: State,
    /// Tools registered from it.
    pub tools: usize,
    /// Tools it offers that are not used, each with why.
    pub skipped: Vec<String>,
    pub protocol_version: Option<String>,
    /// Its name and version, as it gave them.
    pub server: Option<String>,
    pub error: Option<String>,
    pub error_at: Option<String>,
    /// Times it was started again after a failure.
    pub restarts: u32,
}

struct Slot {
    server: Server,
    status: Shown<Status>,
    /// The live session's peer, while connected.
    peer: Mutex<Option<Peer<RoleClient>>>,
    /// Told when a session is up, for calls that wait while the server starts again.
    connected: Notify,
    /// Whether a session was ever up (only then is a call worth waiting for a restart).
    was_up: AtomicBool,
    /// How long a call waits for a server that is down to be up again: the first pause before
    /// a restart and its handshake.
    restart_wait: Duration,
    /// The registry names of its tools.
    registered: Mutex<Vec<String>>,
}

pub struct McpServers {
    slots: Vec<Arc<Slot>>,
    registry: Arc<ToolRegistry>,
    env: Arc<SettingsStore>,
    connect_timeout: Duration,
    keepers: Keepers,
}

impl McpServers {
    /// The servers of `[mcp]`, not started yet; their tool names are known to the registry
    /// from now on.
    pub fn new(
        section: &McpSection,
        registry: Arc<ToolRegistry>,
        env: Arc<SettingsStore>,
    ) -> anyhow::Result<Arc<Self>> {
        let connect_timeout = section.connect_timeout()?;
        let slots = section
            .servers()?
            .into_iter()
            .map(|server| {
                registry.add_source(
                    &tools::prefix(&server.name),
                    &format!("the MCP server {:?}", server.name),
                );
                Arc::new(Slot {
                    status: Shown::new(Status {
                        name: server.name.clone(),
                        transport: server.transport.kind(),
                        state: State::Connecting,
                        tools: 0,
                        skipped: Vec::new(),
                        protocol_version: None,
                        server: None,
                        error: None,
                        error_at: None,
                        restarts: 0,
                    }),
                    server,
                    peer: Mutex::default(),
                    connected: Notify::new(),
                    was_up: AtomicBool::new(false),
                    restart_wait: FIRST_PAUSE + connect_timeout,
                    registered: Mutex::default(),
                })
            })
            .collect();
        Ok(Arc::new(Self {
            slots,
            registry,
            env,
            connect_timeout,
            keepers: Keepers::default(),
        }))
    }

    /// Connects every server and keeps it connected until [`McpServers::stop`].
    pub fn start(self: &Arc<Self>) {
        for slot in &self.slots {
            self.keepers.spawn(Arc::clone(self).keep(Arc::clone(slot)));
        }
    }

    /// Ends every session; stdio servers' processes are killed.
    pub fn stop(&self) -> BoxFuture<'_, ()> {
        self.keepers.stop()
    }

    /// Returns once every server answered its first handshake or failed it (bounded by the
    /// handshake timeout), so a one-off run sees the tools there are.
    pub async fn settled(&self) {
        let first_try = |status: &Status| status.state == State::Connecting && status.restarts == 0;
        kept::settled(self.connect_timeout + Duration::from_secs(1), || {
            self.statuses().iter().any(first_try)
        })
        .await;
    }

    pub fn statuses(&self) -> Vec<Status> {
        self.slots.iter().map(|slot| slot.status()).collect()
    }

    async fn keep(self: Arc<Self>, slot: Arc<Slot>) {
        let mut pause = FIRST_PAUSE;
        loop {
            slot.update(|status| status.state = State::Connecting);
            let secret = |name: &str| {
                self.env
                    .get(name)
                    .ok_or_else(|| format!("{name} is not set (environment or .env)"))
            };
            let opened = tokio::select! {
                opened = tokio::time::timeout(self.connect_timeout, Connection::open(&slot.server, &secret)) => opened,
                () = self.keepers.stopped() => return,
            };
            match opened {
                Err(_) => slot.fail(format!(
                    "no answer to the handshake within {} s",
                    self.connect_timeout.as_secs()
                )),
                Ok(Err(e)) => slot.fail(e),
                Ok(Ok(connection)) => {
                    let up = Instant::now();
                    if self.serve(&slot, connection).await.is_none() {
                        return;
                    }
                    if up.elapsed() >= LAST_PAUSE {
                        pause = FIRST_PAUSE;
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.keepers.stopped() => return,
            }
            pause = (pause * 2).min(LAST_PAUSE);
            slot.update(|status| status.restarts += 1);
        }
    }

    /// Serves a connection until it fails (`Some`, its failure recorded) or the runtime stops
    /// (`None`).
    async fn serve(&self, slot: &Arc<Slot>, mut connection: Connection) -> Option<()> {
        slot.update(|status| {
            status.protocol_version = connection.protocol_version();
            status.server = connection.server_name();
        });
        *slot.peer.lock().unwrap_or_else(PoisonError::into_inner) = Some(connection.peer.clone());
        slot.was_up.store(true, Ordering::Relaxed);
        slot.connected.notify_waiters();
        let (peer, changed) = (
            connection.peer.clone(),
            Arc::clone(&connection.tools_changed),
        );
        let mut listed = self.list(slot, &peer).await;
        while listed.is_ok() {
            tokio::select! {
                () = changed.notified() => listed = self.list(slot, &peer).await,
                reason = connection.closed() => listed = Err(reason),
                () = self.keepers.stopped() => {
                    slot.disconnect();
                    return None;
                }
            }
        }
        slot.disconnect();
        if let Err(e) = listed {
            slot.fail(e);
        }
        Some(())
    }

    /// Lists the server's tools and registers them in place of the ones it had. The listing is
    /// part of keeping the session, so it has the handshake's time, not a tool call's.
    async fn list(&self, slot: &Arc<Slot>, peer: &Peer<RoleClient>) -> Result<(), String> {
        let offered = tokio::time::timeout(self.connect_timeout, peer.list_all_tools())
            .await
            .map_err(|_| "listing its tools timed out".to_owned())?
            .map_err(|e| format!("cannot list its tools: {e}"))?;
        let mut registered = slot
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for name in registered.drain(..) {
            self.registry.unregister(&name);
        }
        let mut skipped = Vec::new();
        for tool in offered.iter() {
            if registered.len() == tools::MAX_TOOLS {
                skipped.push(format!(
                    "{}: past the first {} tools",
                    tool.name,
                    tools::MAX_TOOLS
                ));
                continue;
            }
            match slot.register(tool, &self.registry) {
                Ok(name) => registered.push(name),
                Err(e) => skipped.push(format!("{}: {e}", tool.name)),
            }
        }
        let count = registered.len();
        slot.update(|status| {
            status.state = State::Ready;
            status.tools = count;
            status.skipped = skipped;
            status.error = None;
            status.error_at = None;
        });
        Ok(())
    }
}

impl Slot {
    fn status(&self) -> Status {
        self.status.get()
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        self.status.update(change);
    }

    fn fail(&self, error: String) {
        tracing::warn!(mcp_server = %self.server.name, "{error}");
        self.update(|status| {
            status.state = State::Error;
            status.error = Some(error);
            status.error_at = Some(db::now());
        });
    }

    fn disconnect(&self) {
        *self.peer.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Registers one of the server's tools; its registry name.
    fn register(
        self: &Arc<Self>,
        tool: &rmcp::model::Tool,
        registry: &ToolRegistry,
    ) -> Result<String, String> {
        let name = tools::registry_name(&self.server.name, &tool.name)
            .ok_or("its name is too long for a tool name")?;
        let parameters = tools::schema(tool)?;
        let (slot, remote) = (Arc::clone(self), tool.name.to_string());
        let handler = move |input: Value, ctx: ToolContext| {
            let (slot, remote) = (Arc::clone(&slot), remote.clone());
            async move { slot.call(&remote, input, &ctx.cancel).await }
        };
        let tool = Tool::new(&name, &tools::description(tool), parameters, handler).named_only();
        registry.register(tool, false).map_err(|e| e.to_string())?;
        Ok(name)
    }

    /// The session's peer, waiting (at most `restart_wait`) while the server is down or its
    /// session has just closed: a call made as a server restarts goes to the new session.
    async fn live_peer(&self) -> Option<Peer<RoleClient>> {
        let deadline = Instant::now() + self.restart_wait;
        loop {
            // Registered before looking, so a session that comes up meanwhile is not missed.
            let connected = self.connected.notified();
            tokio::pin!(connected);
            connected.as_mut().enable();
            let peer = self
                .peer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(peer) = peer.filter(|peer| !peer.is_transport_closed()) {
                return Some(peer);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            // A server that never came up is not waited for: it is not restarting.
            if left.is_zero() || !self.was_up.load(Ordering::Relaxed) {
                return None;
            }
            // A closed session is cleared by its keeper soon; look again then or when told.
            let _ = tokio::time::timeout(left.min(Duration::from_millis(100)), connected).await;
        }
    }

    /// Calls `tool` on the server, within the call timeout, abandoned (the server is told)
    /// when the run is cancelled.
    async fn call(
        &self,
        tool: &str,
        input: Value,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let server = &self.server.name;
        let peer = tokio::select! {
            peer = self.live_peer() => peer,
            () = cancel.cancelled() => return Err("the run was cancelled".to_owned()),
        };
        let peer = peer.ok_or_else(|| {
            let status = self.status();
            let why = status
                .error
                .unwrap_or_else(|| "it is connecting".to_owned());
            format!("the MCP server {server:?} is not connected: {why}")
        })?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        // The tool call's span goes on at the server (MCP carries it in `_meta`).
        let trace = propagation::carrier();
        if let Some(traceparent) = trace.get("traceparent") {
            let mut meta = RequestMetaObject::default();
            meta.set_traceparent(traceparent.clone());
            if let Some(state) = trace.get("tracestate") {
                meta.set_tracestate(state.clone());
            }
            params.meta = Some(meta);
        }
        match input {
            Value::Object(arguments) => params = params.with_arguments(arguments),
            Value::Null => {}
            _ => return Err("the arguments must be a JSON object".to_owned()),
        }
        let timeout = self.server.call_timeout;
        tokio::select! {
            result = tokio::time::timeout(timeout, peer.call_tool(params)) => match result {
                Err(_) => Err(format!(
                    "the MCP server {server:?} did not answer within {} s",
                    timeout.as_secs()
                )),
                Ok(Err(e)) => Err(format!("the MCP server {server:?} failed: {e}")),
                Ok(Ok(result)) => tools::answer(result),
            },
            () = cancel.cancelled() => Err("the run was cancelled".to_owned()),
        }
    }
}
