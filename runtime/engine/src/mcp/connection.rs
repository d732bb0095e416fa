//! One connection to an MCP server: its transport (a guarded child process, or Streamable HTTP),
//! the handshake at the newest protocol revision both ends speak, and word of its tool list
//! changing.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ErrorCode, Implementation, ProtocolVersion,
    SubscriptionFilter,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, NotificationContext, Peer, QuitReason,
    RunningServiceCancellationToken,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientServiceExt, RoleClient};
use tokio::io::AsyncRead;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, FramedRead};

use super::process::{self, Guarded};
use super::settings::{Server, Transport};
use crate::placeholders;

/// The largest message a server may send (a tool's answer among them); a larger one is
/// discarded as it arrives, so the call it answers times out. What reaches the model is cut
/// much shorter (the registry's result cap).
pub(super) const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// A stdio server's stderr is read a line at a time; longer lines are skipped.
const MAX_STDERR_BYTES: usize = 4_096;

/// This runtime as an MCP client: it asks for nothing but tools and hears when they change.
#[derive(Clone)]
struct Listener {
    tools_changed: Arc<Notify>,
    /// The revision an `initialize` asks for: the newest that has it.
    asks_for: ProtocolVersion,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), identity())
            .with_protocol_version(self.asks_for.clone())
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// How this runtime names itself to MCP peers.
pub(super) fn identity() -> Implementation {
    Implementation::new("service-runtime", env!("CARGO_PKG_VERSION"))
}

/// A live connection. Dropping it ends the session and, for stdio, the server's processes.
pub(super) struct Connection {
    pub peer: Peer<RoleClient>,
    /// Notified when the server says its tools changed.
    pub tools_changed: Arc<Notify>,
    /// Ends when the session does, with the reason.
    session: JoinHandle<Option<QuitReason>>,
    stop: Option<RunningServiceCancellationToken>,
    /// What the server's program last wrote to stderr, for the status when it dies.
    last_stderr: Arc<Mutex<Option<String>>>,
    listening: Option<JoinHandle<()>>,
    _process: Option<Guarded>,
}

impl Connection {
    /// Starts the transport and performs the handshake; `secret` fills `{{secret:NAME}}`.
    ///
    /// A server is asked with `server/discover` first; one that refuses it with a JSON-RPC error
    /// predates it and gets `initialize` on a fresh transport. (rmcp's own fallback gives
    /// discovery a fixed 10 s and then sends `initialize` on the same stream, which fails
    /// when a slow server answers the first request late; the caller's timeout bounds both
    /// here.)
    pub(super) async fn open(
        server: &Server,
        secret: &(dyn Fn(&str) -> Result<String, String> + Sync),
    ) -> Result<Self, String> {
        let discover = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::LATEST],
        };
        match Self::open_with(server, secret, discover).await {
            Err(Refused::Discover(refusal)) => {
                Self::open_with(server, secret, ClientLifecycleMode::Initialize)
                    .await
                    .map_err(|e| format!("{} (it refused server/discover: {refusal})", e.message()))
            }
            opened => opened.map_err(Refused::message),
        }
    }

    async fn open_with(
        server: &Server,
        secret: &(dyn Fn(&str) -> Result<String, String> + Sync),
        lifecycle: ClientLifecycleMode,
    ) -> Result<Self, Refused> {
        let tools_changed = Arc::new(Notify::new());
        let asks_for = match lifecycle {
            ClientLifecycleMode::Initialize => ProtocolVersion::LATEST_WITH_INITIALIZE,
            _ => ProtocolVersion::LATEST,
        };
        let listener = Listener {
            tools_changed: Arc::clone(&tools_changed),
            asks_for,
        };
        let last_stderr = Arc::new(Mutex::new(None));
        let (service, process) = match &server.transport {
            Transport::Stdio { program, args, env } => {
                let spawned = process::spawn(program, args, &placeholders::fill_all(env, secret)?)
                    .map_err(|e| format!("cannot start {program:?}: {e}"))?;
                log_stderr(&server.name, spawned.stderr, Arc::clone(&last_stderr));
                let transport = AsyncRwTransport::new_client(spawned.stdout, spawned.stdin)
                    .with_max_line_length(MAX_MESSAGE_BYTES);
                let service = handshake(listener, transport, lifecycle)
                    .await
                    .map_err(|e| e.map(|message| with_stderr(message, &last_stderr)))?;
                (service, Some(spawned.process))
            }
            Transport::Http { url, headers } => {
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(placeholders::headers(headers, secret)?)
                    .max_sse_event_size(MAX_MESSAGE_BYTES)
                    .max_json_response_size(MAX_MESSAGE_BYTES);
                let transport = StreamableHttpClientTransport::with_client(http_client()?, config);
                (handshake(listener, transport, lifecycle).await?, None)
            }
        };
        let peer = service.peer().clone();
        let stop = service.cancellation_token();
        let session = tokio::spawn(async move { service.waiting().await.ok() });
        let listening = listen_for_changes(&peer, &tools_changed);
        Ok(Self {
            peer,
            tools_changed,
            session,
            stop: Some(stop),
            last_stderr,
            listening,
            _process: process,
        })
    }

    /// The protocol revision agreed on.
    pub(super) fn protocol_version(&self) -> Option<String> {
        self.peer
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    /// The server's name and version, as it gave them.
    pub(crate) fn server_name(&self) -> Option<String> {
        let info = self.peer.peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// Waits until the session ends on the server's side; says why.
    pub(super) async fn closed(&mut self) -> String {
        let reason = match (&mut self.session).await {
            Ok(Some(QuitReason::Closed)) => "the server closed the connection".to_owned(),
            Ok(Some(QuitReason::JoinError(e))) => format!("the session failed: {e}"),
            Ok(Some(QuitReason::Cancelled)) => "the session was ended".to_owned(),
            Ok(_) | Err(_) => "the session ended unexpectedly".to_owned(),
        };
        with_stderr(reason, &self.last_stderr)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        if let Some(listening) = &self.listening {
            listening.abort();
        }
    }
}

/// Why a handshake failed: a JSON-RPC refusal of `server/discover` (the server predates it)
/// or anything else.
enum Refused {
    Discover(String),
    Other(String),
}

impl Refused {
    fn message(self) -> String {
        match self {
            Self::Discover(message) | Self::Other(message) => message,
        }
    }

    fn map(self, change: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Discover(message) => Self::Discover(change(message)),
            Self::Other(message) => Self::Other(change(message)),
        }
    }
}

impl From<String> for Refused {
    fn from(message: String) -> Self {
        Self::Other(message)
    }
}

async fn handshake<T, E, A>(
    listener: Listener,
    transport: T,
    lifecycle: ClientLifecycleMode,
) -> Result<rmcp::service::RunningService<RoleClient, Listener>, Refused>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let discovering = matches!(lifecycle, ClientLifecycleMode::Discover { .. });
    listener
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| {
            // The two codes a server that knows `server/discover` refuses it with.
            let refused_discovery = discovering
                && matches!(&e, ClientInitializeError::JsonRpcError(data)
                    if data.code != ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                        && data.code != ErrorCode::HEADER_MISMATCH);
            let message = format!("the handshake failed: {e}");
            if refused_discovery {
                Refused::Discover(message)
            } else {
                Refused::Other(message)
            }
        })
}

/// Servers at a revision without `initialize` announce tool changes on a subscription rather
/// than to the session.
fn listen_for_changes(peer: &Peer<RoleClient>, changed: &Arc<Notify>) -> Option<JoinHandle<()>> {
    let info = peer.peer_info()?;
    let announces = info
        .capabilities
        .tools
        .as_ref()
        .is_some_and(|tools| tools.list_changed == Some(true));
    if info.protocol_version.has_initialize() || !announces {
        return None;
    }
    let (peer, changed) = (peer.clone(), Arc::clone(changed));
    Some(tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let Ok(mut subscription) = peer.listen(filter).await else {
            return;
        };
        while let Ok(Some(_)) = subscription.next().await {
            changed.notify_one();
        }
    }))
}

/// rmcp's HTTP client is reqwest 0.13; it gets the TLS of the rest of the service.
fn http_client() -> Result<reqwest013::Client, String> {
    let tls = crate::net::rustls_config().map_err(|e| format!("no usable TLS setup: {e}"))?;
    reqwest013::Client::builder()
        .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// Logs what a stdio server writes to stderr at debug level (it is for people, and a chatty
/// server should not fill the log) and keeps its last line for the server's status.
fn log_stderr(
    server: &str,
    stderr: impl AsyncRead + Unpin + Send + 'static,
    last: Arc<Mutex<Option<String>>>,
) {
    let server = server.to_owned();
    let codec =
        AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), MAX_STDERR_BYTES);
    let mut lines = FramedRead::new(stderr, codec);
    tokio::spawn(async move {
        while let Some(line) = lines.next().await {
            let line = match line {
                Ok(line) => String::from_utf8_lossy(&line).trim_end().to_owned(),
                // The rest of an over-long line is skipped.
                Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => continue,
                Err(_) => break,
            };
            if line.is_empty() {
                continue;
            }
            tracing::debug!(mcp_server = %server, "{line}");
            *last.lock().unwrap_or_else(PoisonError::into_inner) = Some(line);
        }
    });
}

fn with_stderr(reason: String, last: &Mutex<Option<String>>) -> String {
    match &*last.lock().unwrap_or_else(PoisonError::into_inner) {
        Some(line) => format!("{reason} (its last words: {line})"),
        None => reason,
    }
}
