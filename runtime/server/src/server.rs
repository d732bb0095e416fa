//! `service-runtime serve`: open the state, listen, start the adapters in the background,
//! serve until Ctrl-C or SIGTERM, then drain: no new requests, running jobs finish within the
//! grace period, adapters stop in reverse order.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::adapters::Supervisor;
use crate::app::App;
use crate::config::{DEFAULT_HOST, DEFAULT_PORT};
use crate::http::limits::Limits;
use crate::http::{self, AppState, guards::Binding};
use crate::wasm::{self, Worker};
use crate::{jobs, kv, tasks, traces};

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
    // Work of a previous process cannot still be running: its jobs go back to the queue (up
    // to their attempt limit), anything else it was running failed.
    let attempts = app.config.jobs.attempts();
    app.db.blocking(|conn| {
        jobs::requeue_interrupted(conn, attempts)?;
        tasks::fail_interrupted(conn)?;
        traces::fail_interrupted(conn)
    })?;
    app.supervisor.load_choices().await?;
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
    let limits = Limits::from_config(&app.config.server);
    let router = http::router(state, binding, limits);

    // Installed before anything slow, so a signal during start-up shuts down cleanly too.
    let signal = shutdown_signal()?;
    let runs = app.shutdown.clone();
    let shutdown = async move {
        signal.await;
        runs.cancel();
    };
    // Printed on stdout (logs go to stderr) as soon as requests are taken, so scripts and
    // tests can find a port chosen by `--port 0`. Adapters start behind it: a slow `start` or
    // a component compiling never holds the server from listening.
    println!("service-runtime listening on http://{addr}");
    tracing::info!(
        data_dir = %app.data_dir.display(),
        %addr,
        provider = %app.engine.settings().kind,
        model = app.engine.settings().model(),
        "serving"
    );
    let background = CancellationToken::new();
    let started = tokio::spawn(start_adapters(
        Arc::clone(&app.supervisor),
        Arc::clone(&app.components),
        background.clone(),
    ));
    let jobs_stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker {
            components: Arc::clone(&app.components),
            supervisor: Arc::clone(&app.supervisor),
            db: app.db.clone(),
            running: Arc::clone(&app.running),
            ready: Arc::clone(&app.jobs_ready),
            settings: app.config.jobs,
        }
        .run(jobs_stop.clone()),
    );
    purge_kv_hourly(&app, background.clone());

    http::listener::serve(listener, router, limits, shutdown).await;
    // No new jobs; running ones finish within the grace period.
    jobs_stop.cancel();
    let _ = worker.await;
    // Start-up and the watcher end before anything stops, so nothing starts after the stops.
    background.cancel();
    let _ = started.await;
    app.supervisor.stop_all().await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts the native adapters, loads the components, then watches the adapters folder (hot
/// reload) until `stop`.
async fn start_adapters(
    supervisor: Arc<Supervisor>,
    components: Arc<wasm::Components>,
    stop: CancellationToken,
) {
    supervisor.start_natives().await;
    tokio::select! {
        () = components.discover() => {}
        () = stop.cancelled() => return,
    }
    supervisor.mark_ready();
    wasm::watch(components, stop).await;
}

/// Expired kv entries (a day's worth of event claims, say) go at start and then hourly.
fn purge_kv_hourly(app: &App, stop: CancellationToken) {
    let db = app.db.clone();
    tokio::spawn(async move {
        let mut hourly = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = hourly.tick() => {
                    if let Err(e) = db.call(|conn| kv::purge_expired(conn)).await {
                        tracing::warn!("cannot purge expired kv entries: {e}");
                    }
                }
                () = stop.cancelled() => return,
            }
        }
    });
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
