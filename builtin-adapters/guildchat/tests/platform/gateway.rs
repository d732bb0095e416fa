//! The WebSocket gateway: HELLO; IDENTIFY -> READY (a new session); RESUME -> the missed
//! dispatches and RESUMED, or Invalid Session when the session cannot be resumed; heartbeats and
//! their acks; numbered dispatches. A session outlives its connection, as on the platform, so a
//! client can resume it on a new one. Tests ask for the gateway's churn on demand: Reconnect
//! (op 7), Invalid Session (op 9) and a connection cut without a close frame.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::fixtures::{BOT_ID, bot_user};
use super::{FakePlatform, Shared};

const HEARTBEAT_MS: u64 = 1_000;

#[derive(Default)]
pub(super) struct Gateway {
    /// Every session, the newest last.
    sessions: Vec<Session>,
    /// How many connections were accepted; also the next connection's id.
    connections: u64,
    identifies: Vec<Value>,
    resumes: Vec<Value>,
    heartbeats: usize,
    closed_connections: usize,
}

struct Session {
    id: String,
    /// The last sequence number handed out.
    seq: u64,
    /// Every dispatch, kept to replay what a resuming client missed.
    sent: Vec<Value>,
    resumable: bool,
    /// The connection the session is live on, if any.
    live_on: Option<Link>,
}

/// The way to one connection's writer.
#[derive(Clone)]
struct Link {
    connection: u64,
    outbox: mpsc::UnboundedSender<Outgoing>,
}

enum Outgoing {
    Payload(Value),
    /// Drop the TCP connection without a close frame.
    Cut,
}

impl Link {
    fn send(&self, payload: Value) {
        // A connection that already ended has nobody left to tell.
        let _ = self.outbox.send(Outgoing::Payload(payload));
    }
}

impl Session {
    /// Numbers the event, keeps it for replay and sends it if the session is live.
    fn dispatch(&mut self, event: &str, data: Value) {
        self.seq += 1;
        let payload = json!({ "op": 0, "t": event, "s": self.seq, "d": data });
        self.sent.push(payload.clone());
        if let Some(link) = &self.live_on {
            link.send(payload);
        }
    }

    fn link(&self) -> &Link {
        self.live_on
            .as_ref()
            .expect("the newest gateway session has no live connection")
    }
}

impl Gateway {
    fn newest(&mut self) -> &mut Session {
        self.sessions
            .last_mut()
            .expect("no gateway session yet (nobody identified)")
    }

    /// Starts a session on this connection with READY.
    fn identify(&mut self, link: Link, resume_url: &str) {
        let id = format!("session-{}", self.sessions.len() + 1);
        let mut session = Session {
            id: id.clone(),
            seq: 0,
            sent: Vec::new(),
            resumable: true,
            live_on: Some(link),
        };
        session.dispatch(
            "READY",
            json!({ "v": 10, "user": bot_user(), "guilds": [], "session_id": id,
                    "resume_gateway_url": resume_url, "shard": [0, 1],
                    "application": { "id": BOT_ID.to_string(), "flags": 0 } }),
        );
        self.sessions.push(session);
    }

    /// Moves the session onto this connection and replays what came after the client's last
    /// sequence number, then RESUMED. An unknown or invalidated session gets op 9 instead.
    fn resume(&mut self, data: Value, link: Link) {
        let seen = data["seq"].as_u64().unwrap_or(0);
        let session = self
            .sessions
            .iter_mut()
            .find(|s| s.resumable && data["session_id"] == s.id.as_str());
        self.resumes.push(data);
        let Some(session) = session else {
            link.send(json!({ "op": 9, "d": false }));
            return;
        };
        for payload in session.sent.iter().filter(|p| p["s"].as_u64() > Some(seen)) {
            link.send(payload.clone());
        }
        session.live_on = Some(link);
        session.dispatch("RESUMED", json!({}));
    }

    fn disconnected(&mut self, connection: u64) {
        self.closed_connections += 1;
        for session in &mut self.sessions {
            if session.live_on.as_ref().map(|l| l.connection) == Some(connection) {
                session.live_on = None;
            }
        }
    }
}

impl FakePlatform {
    /// Sends a dispatch (op 0) in the newest session. While the session waits for a resume, the
    /// event is only kept for the replay.
    pub fn dispatch(&self, event: &str, data: Value) {
        self.shared.world().gateway.newest().dispatch(event, data);
    }

    /// Asks the client to reconnect and resume (op 7).
    pub fn request_reconnect(&self) {
        let mut world = self.shared.world();
        world
            .gateway
            .newest()
            .link()
            .send(json!({ "op": 7, "d": null }));
    }

    /// Invalidates the newest session (op 9). A resumable session may be resumed; otherwise the
    /// client must identify anew, and a RESUME of it is refused.
    pub fn invalidate_session(&self, resumable: bool) {
        let mut world = self.shared.world();
        let session = world.gateway.newest();
        session.resumable = resumable;
        session.link().send(json!({ "op": 9, "d": resumable }));
    }

    /// Drops the newest session's TCP connection without a WebSocket close frame.
    pub fn cut_connection(&self) {
        let mut world = self.shared.world();
        let _ = world.gateway.newest().link().outbox.send(Outgoing::Cut);
    }

    /// The `d` of every IDENTIFY (op 2), in order.
    pub fn identifies(&self) -> Vec<Value> {
        self.shared.world().gateway.identifies.clone()
    }

    /// The `d` of every RESUME (op 6), in order: `session_id`, `seq` and `token`.
    pub fn resumes(&self) -> Vec<Value> {
        self.shared.world().gateway.resumes.clone()
    }

    pub fn heartbeats(&self) -> usize {
        self.shared.world().gateway.heartbeats
    }

    /// Connections that have ended, whoever ended them.
    pub fn closed_connections(&self) -> usize {
        self.shared.world().gateway.closed_connections
    }
}

pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Ok(socket) = tokio_tungstenite::accept_async(stream).await {
                let (outbox, inbox) = mpsc::unbounded_channel();
                let connection = {
                    let mut world = shared.world();
                    world.gateway.connections += 1;
                    world.gateway.connections
                };
                converse(socket, &shared, Link { connection, outbox }, inbox).await;
                shared.world().gateway.disconnected(connection);
            }
        });
    }
}

/// One connection, until either side ends it.
async fn converse(
    socket: WebSocketStream<TcpStream>,
    shared: &Shared,
    link: Link,
    mut inbox: mpsc::UnboundedReceiver<Outgoing>,
) {
    let (mut sink, mut stream) = socket.split();
    link.send(json!({ "op": 10, "d": { "heartbeat_interval": HEARTBEAT_MS } }));
    loop {
        tokio::select! {
            frame = stream.next() => {
                let Some(Ok(frame)) = frame else { return };
                let Frame::Text(text) = frame else { continue };
                let payload: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                let data = payload["d"].clone();
                match payload["op"].as_u64() {
                    Some(1) => {
                        shared.world().gateway.heartbeats += 1;
                        link.send(json!({ "op": 11 }));
                    }
                    Some(2) => {
                        shared.world().gateway.identifies.push(data.clone());
                        if !shared.accepts(&data["token"]) {
                            return refuse_authentication(sink, stream).await;
                        }
                        shared.world().gateway.identify(link.clone(), &shared.gateway_url);
                    }
                    Some(6) => shared.world().gateway.resume(data, link.clone()),
                    _ => {}
                }
            }
            Some(outgoing) = inbox.recv() => {
                let Outgoing::Payload(payload) = outgoing else { return };
                if sink.send(Frame::text(payload.to_string())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Closes with 4004 Authentication failed, then reads on until the client closes, as the
/// platform does.
async fn refuse_authentication(
    mut sink: impl SinkExt<Frame> + Unpin,
    mut stream: impl StreamExt + Unpin,
) {
    let close = CloseFrame {
        code: CloseCode::from(4004),
        reason: "Authentication failed.".into(),
    };
    let _ = sink.send(Frame::Close(Some(close))).await;
    let drained = async { while stream.next().await.is_some() {} };
    let _ = tokio::time::timeout(Duration::from_secs(2), drained).await;
}
