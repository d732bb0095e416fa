//! `service-runtime serve`: open the state, bind, serve until Ctrl-C or SIGTERM.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::app::App;
use crate::config::{DEFAULT_HOST, DEFAULT_PORT};
use crate::http::{self, AppState, guards::Binding};
use crate::{scheduler, tasks, traces};

/// Where to listen and where the state lives, after flags and environment were applied.
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub host: Option<String>,
    pub port: Option<u16>,
}

pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let app = App::open(&options.data_dir)?;
    // Work of a previous process cannot still be running.
    app.db.blocking(|conn| {
        tasks::fail_interrupted(conn)?;
        traces::fail_interrupted(conn)
    })?;
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
    app.adapters.start_all(&held_back(&app)).await?;
    let served = axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await;
    app.adapters.stop_all().await;
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// Adapters that settings keep from starting, with the reason the registry shows.
fn held_back(app: &App) -> HashMap<&'static str, String> {
    let mut held = HashMap::new();
    if app.env.get("SERVICE_DISABLE_SCHEDULER").as_deref() == Some("true") {
        held.insert(
            scheduler::NAME,
            "disabled by SERVICE_DISABLE_SCHEDULER=true".to_owned(),
        );
    }
    held
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
