//! `service-runtime serve`: open the state, bind, serve until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::agents::profiles;
use crate::config::{DEFAULT_HOST, DEFAULT_PORT, FileConfig};
use crate::db::{self, Db};
use crate::environment::Environment;
use crate::http::{self, AppState, guards::Binding};

/// Where to listen and where the state lives, after flags and environment were applied.
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub host: Option<String>,
    pub port: Option<u16>,
}

pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let data_dir = options.data_dir;
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
    let config = FileConfig::load(&data_dir)?;
    let env = Arc::new(Environment::load(&data_dir)?);
    let db = Db::open(&data_dir.join(db::FILE_NAME))?;
    db.blocking(|conn| profiles::ensure_default(conn))?;

    let host = options
        .host
        .or(config.server.host)
        .unwrap_or_else(|| DEFAULT_HOST.to_owned());
    let port = options.port.or(config.server.port).unwrap_or(DEFAULT_PORT);
    let listener = TcpListener::bind((host.as_str(), port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))?;
    let addr = listener.local_addr()?;

    let state = AppState {
        db,
        env,
        http: reqwest::Client::builder()
            .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
            .build()?,
    };
    let binding = Binding {
        loopback: addr.ip().is_loopback(),
    };
    let app = http::router(state, binding);

    // Printed on stdout (logs go to stderr) so scripts and tests can find a port chosen by `--port 0`.
    println!("service-runtime listening on http://{addr}");
    tracing::info!(data_dir = %data_dir.display(), %addr, "serving");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            let _ = ctrl_c.await;
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
