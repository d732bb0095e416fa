//! `service-runtime serve`: open the state, bind, serve until Ctrl-C or SIGTERM.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::{DEFAULT_HOST, DEFAULT_PORT};
use crate::http::{self, AppState, guards::Binding};
use crate::wasm::Worker;
use crate::{adapters, kv, scheduler, tasks, traces};

/// Where to listen and where the state lives, after flags and environment were applied.
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub host: Option<String>,
    pub port: Option<u16>,
}

pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let app = App::open(&options.data_dir)?;
    app.db.checkpoint_in_background(
        &app.data_dir.join(crate::db::FILE_NAME),
        app.shutdown.clone(),
    )?;
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

    // Installed before anything slow, so a signal during start-up shuts down cleanly too.
    let signal = shutdown_signal()?;
    let runs = app.shutdown.clone();
    let shutdown = async move {
        signal.await;
        runs.cancel();
    };
    app.adapters.start_all(&held_back(&app)).await?;
    let (background, watcher) = start_wasm(&app).await?;
    // Printed on stdout (logs go to stderr) once everything runs, so scripts and tests can
    // find a port chosen by `--port 0`.
    println!("service-runtime listening on http://{addr}");
    tracing::info!(
        data_dir = %app.data_dir.display(),
        %addr,
        provider = %app.engine.settings().kind,
        model = app.engine.settings().model(),
        "serving"
    );
    let served = axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await;
    background.cancel();
    // A reload under way finishes first, so nothing starts after the stops below.
    let _ = watcher.await;
    // The reverse of the start order: components, then native adapters.
    app.wasm.stop_all().await;
    app.adapters.stop_all().await;
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// Loads the components, then keeps watching the adapters folder (hot reload, polled twice a
/// second), runs enqueued jobs and purges expired kv entries. Cancelling the token stops all;
/// the handle is the watcher's.
async fn start_wasm(app: &App) -> anyhow::Result<(CancellationToken, JoinHandle<()>)> {
    app.wasm
        .set_disabled(adapters::disabled_names(&app.db).await?);
    app.wasm.discover().await;
    let stop = CancellationToken::new();
    let (host, watch_stop) = (Arc::clone(&app.wasm), stop.clone());
    let watcher = tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500)) => host.reload_changed().await,
                () = watch_stop.cancelled() => return,
            }
        }
    });
    let worker = Worker {
        host: Arc::clone(&app.wasm),
        db: app.db.clone(),
        running: Arc::clone(&app.running),
        ready: Arc::clone(&app.jobs_ready),
    };
    tokio::spawn(worker.run(stop.clone()));
    // Expired kv entries (a day's worth of event claims, say) go at start and then hourly.
    let (db, purge_stop) = (app.db.clone(), stop.clone());
    tokio::spawn(async move {
        let mut hourly = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = hourly.tick() => {
                    if let Err(e) = db.call(|conn| kv::purge_expired(conn)).await {
                        tracing::warn!("cannot purge expired kv entries: {e}");
                    }
                }
                () = purge_stop.cancelled() => return,
            }
        }
    });
    Ok((stop, watcher))
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

/// Resolves at the first Ctrl-C or SIGTERM. The handlers are registered when this is called.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
    })
}
