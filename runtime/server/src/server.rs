//! `service-runtime serve`: open the state, bind, serve until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::app::App;
use crate::config::{DEFAULT_HOST, DEFAULT_PORT};
use crate::http::{self, AppState, guards::Binding};

/// Where to listen and where the state lives, after flags and environment were applied.
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub host: Option<String>,
    pub port: Option<u16>,
}

pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let app = App::open(&options.data_dir)?;
    let host = options
        .host
        .or(app.config.server.host.clone())
        .unwrap_or_else(|| DEFAULT_HOST.to_owned());
    let port = options
        .port
        .or(app.config.server.port)
        .unwrap_or(DEFAULT_PORT);
    let listener = TcpListener::bind((host.as_str(), port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))?;
    let addr = listener.local_addr()?;

    let state = AppState::new(&app)?;
    let binding = Binding {
        loopback: addr.ip().is_loopback(),
    };
    let router = http::router(state, binding);

    // Printed on stdout (logs go to stderr) so scripts and tests can find a port chosen by `--port 0`.
    println!("service-runtime listening on http://{addr}");
    tracing::info!(
        data_dir = %app.data_dir.display(),
        %addr,
        provider = %app.engine.settings().kind,
        model = app.engine.settings().model(),
        "serving"
    );
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
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
