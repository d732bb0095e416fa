//! The WebSocket gateway: HELLO, IDENTIFY -> READY, heartbeats and their acks, and numbered
//! dispatches.

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
    sessions: Vec<mpsc::UnboundedSender<Frame>>,
    identifies: Vec<Value>,
    heartbeats: usize,
    closed_sessions: usize,
}

impl FakePlatform {
    /// Sends a dispatch (op 0) to every connected gateway session.
    pub fn dispatch(&self, event: &str, data: Value) {
        let frame = json!({ "op": 0, "t": event, "d": data });
        let world = self.shared.world();
        assert!(
            !world.gateway.sessions.is_empty(),
            "no gateway session to dispatch {event} to"
        );
        for session in &world.gateway.sessions {
            let _ = session.send(Frame::text(frame.to_string()));
        }
    }

    pub fn identifies(&self) -> Vec<Value> {
        self.shared.world().gateway.identifies.clone()
    }

    pub fn heartbeats(&self) -> usize {
        self.shared.world().gateway.heartbeats
    }

    pub fn closed_sessions(&self) -> usize {
        self.shared.world().gateway.closed_sessions
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
                gateway_session(socket, &shared).await;
            }
            shared.world().gateway.closed_sessions += 1;
        });
    }
}

async fn gateway_session(socket: WebSocketStream<TcpStream>, shared: &Shared) {
    let (mut sink, mut stream) = socket.split();
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": HEARTBEAT_MS } });
    if sink.send(Frame::text(hello.to_string())).await.is_err() {
        return;
    }
    let (to_client, mut outbox) = mpsc::unbounded_channel::<Frame>();
    let mut sequence = 0u64;
    loop {
        tokio::select! {
            frame = stream.next() => {
                let Some(Ok(Frame::Text(text))) = frame else {
                    if matches!(frame, Some(Ok(_))) { continue }
                    return;
                };
                let payload: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                match payload["op"].as_u64() {
                    Some(1) => {
                        shared.world().gateway.heartbeats += 1;
                        let _ = sink.send(Frame::text(json!({ "op": 11 }).to_string())).await;
                    }
                    Some(2) => {
                        shared.world().gateway.identifies.push(payload["d"].clone());
                        if !shared.accepts(&payload["d"]["token"]) {
                            let close = CloseFrame { code: CloseCode::from(4004), reason: "Authentication failed.".into() };
                            let _ = sink.send(Frame::Close(Some(close))).await;
                            // Keep reading until the client closes, as a server would.
                            tokio::time::timeout(Duration::from_secs(2), async { while stream.next().await.is_some() {} }).await.ok();
                            return;
                        }
                        sequence += 1;
                        let ready = json!({ "op": 0, "t": "READY", "s": sequence, "d": {
                            "v": 10, "user": bot_user(), "guilds": [], "session_id": "session-1",
                            "resume_gateway_url": shared.gateway_url, "shard": [0, 1],
                            "application": { "id": BOT_ID.to_string(), "flags": 0 }
                        }});
                        if sink.send(Frame::text(ready.to_string())).await.is_err() { return }
                        shared.world().gateway.sessions.push(to_client.clone());
                    }
                    _ => {}
                }
            }
            Some(frame) = outbox.recv() => {
                // Number each dispatch, as the gateway does.
                let frame = match frame {
                    Frame::Text(text) => {
                        sequence += 1;
                        let mut payload: Value = serde_json::from_str(&text).unwrap();
                        payload["s"] = json!(sequence);
                        Frame::text(payload.to_string())
                    }
                    other => other,
                };
                if sink.send(frame).await.is_err() { return }
            }
        }
    }
}
