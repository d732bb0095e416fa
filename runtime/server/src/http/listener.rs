//! Serving the router on a TCP listener (HTTP/1.1) so that slow or idle clients cannot hold the
//! server: at most `max_connections` are served at once (further ones wait in the kernel's
//! backlog until one ends), one client address holds at most `max_connections_per_peer` of
//! them (past it a new connection is answered 503 and closed), a request's headers must arrive
//! within the header deadline (which also closes idle keep-alive connections), its body within
//! the body deadline (see [`super::limits`]), and an answer must be read: a connection whose
//! client reads nothing for the write deadline is closed. At shutdown no new connection is
//! taken and the open ones finish their requests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use super::limits::Limits;
use super::write_deadline::WriteDeadline;

pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(Peers::default());
    let mut shutdown = pin!(shutdown);
    loop {
        // A permit first: at the cap, connections stay in the backlog instead of being
        // accepted and left waiting.
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(share) = peers.enter(peer.ip(), limits.max_connections_per_peer) else {
            turn_away(stream, limits.max_connections_per_peer, permit);
            continue;
        };
        let stream = WriteDeadline::new(stream, limits.write_timeout);
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            // What the loopback guards judge: the socket's peer, never a header.
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(request.map(Body::new))
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop((share, permit));
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// How many connections each client address holds.
#[derive(Default)]
struct Peers(Mutex<HashMap<IpAddr, usize>>);

/// One of a peer's connections, given back when dropped.
struct Share {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    fn enter(self: &Arc<Self>, ip: IpAddr, most: usize) -> Option<Share> {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(ip).or_default();
        if *count >= most {
            return None;
        }
        *count += 1;
        Some(Share {
            peers: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.peers.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// Tells a client over its share why it is refused and closes the connection, reading what
/// it sent for a moment first (closing with its request unread would reset the connection,
/// and the answer with it). Until then it keeps its place among the server's connections
/// (`permit`), so refusals cannot hold more sockets than the cap either.
fn turn_away(mut stream: tokio::net::TcpStream, most: usize, permit: OwnedSemaphorePermit) {
    let body = format!(
        "{{\"error\":\"this address already has {most} connections open, the most one client \
         may hold; close some and try again\"}}"
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::spawn(async move {
        let _ = tokio::time::timeout(TURN_AWAY, async {
            stream.write_all(answer.as_bytes()).await?;
            stream.shutdown().await?;
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            std::io::Result::Ok(())
        })
        .await;
        drop(permit);
    });
}

/// How long a connection turned away may take to hear why.
const TURN_AWAY: Duration = Duration::from_millis(500);

/// A refused or reset connection is the client's business; anything else (out of file
/// descriptors, say) is logged and accepting pauses for a moment so it can pass.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("cannot accept a connection: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
