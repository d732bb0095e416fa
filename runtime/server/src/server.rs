//! `service-runtime serve`: open the state, listen, start the adapters in the background,
//! serve until Ctrl-C or SIGTERM, then drain: no new requests, running jobs finish within the
//! grace period, adapters stop in reverse order.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::access::links::{self, Link};
use crate::access::{audit, budget, sessions, single_sign_on, users};
use crate::adapters::{Singletons, Supervisor};
use crate::app::{App, Role};
use crate::config::{DEFAULT_HOST, DEFAULT_PORT};
use crate::http::limits::Limits;
use crate::http::{self, AppState, guards::Binding};
use crate::peers::Peers;
use crate::resumer::Resumer;
use crate::retention;
use crate::wasm::{self, Worker};
use crate::{job_queue, kv_store, replica};

/// Where to listen and where the state lives, after flags and environment were applied.
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub host: Option<String>,
    pub port: Option<u16>,
}

/// A link that creates the first admin, when the server asks everyone to sign in and nobody
/// can: no user has a password, and there is no single sign-on.
async fn first_admin_link(state: &AppState) -> anyhow::Result<Option<String>> {
    // Single sign-on is a way for anyone to sign in.
    if !state.access.sign_in_required() || state.oidc.is_some() {
        return Ok(None);
    }
    let secret = state
        .db
        .call(|conn| {
            if users::anyone_has_a_password(conn)? {
                return Ok(None);
            }
            links::create(conn, &Link::FirstAdmin).map(Some)
        })
        .await?;
    Ok(secret.map(|secret| state.link(&secret)))
}

pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    let app = App::open(&options.data_dir, Role::Server).await?;
    app.db.checkpoint_in_background(app.shutdown.clone())?;
    // Work of this replica's previous process cannot still be running: its jobs go back to
    // the queue (up to their attempt limit), anything else it was running failed. Then it
    // tells the other replicas it is alive.
    replica::recover(&app.db, &app.replica, app.config.jobs.attempts()).await?;
    let presence_stop = CancellationToken::new();
    let watch = replica::Watch {
        bus: Arc::clone(&app.bus),
        job_attempts: app.config.jobs.attempts(),
    };
    let presence = replica::keep_presence(
        app.db.clone(),
        app.replica.clone(),
        presence_stop.clone(),
        Some(watch),
    )
    .await?;
    app.supervisor.load_choices().await?;
    let activity_stop = CancellationToken::new();
    let activity = tokio::spawn(crate::adapters::activity::keep(
        app.db.clone(),
        Arc::clone(app.supervisor.registry()),
        activity_stop.clone(),
    ));
    app.mcp.start();
    app.a2a.start();
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

    let binding = Binding {
        loopback: addr.ip().is_loopback(),
    };
    let state = AppState::new(&app, binding)?.listening_on(addr);
    let greeter = state.clone();
    let access = Arc::clone(&state.access);
    let limits = Limits::from_config(&app.config.server);
    let router = http::router(state, limits);

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
    if let Some(link) = first_admin_link(&greeter).await? {
        // Not a log line (it is a credential), and not worth dying for if nobody reads stdout.
        let _ = writeln!(
            std::io::stdout(),
            "Nobody can sign in yet. Open this link within 15 minutes to create the first admin \
             (it works once):\n  {link}"
        );
    }
    // Commands (`run`, `schedule run`) go through this server while it runs.
    let _announced = crate::running_server::announce(&app.data_dir, addr, access.local_key())
        .map_err(|e| tracing::warn!("cannot write the server's URL to the data directory: {e}"))
        .ok();
    let provider = app.engine.provider_choice();
    tracing::info!(
        data_dir = %app.data_dir.display(),
        database = %app.db.backend().as_str(),
        replica = %app.replica,
        %addr,
        provider = %provider.kind,
        model = provider.model(),
        "serving"
    );
    let background = CancellationToken::new();
    tokio::spawn(Arc::clone(&app.bus).listen(background.clone()));
    // Before the folder is first read: components installed into the database load with it.
    Peers::of(&app).mirror_components().await;
    tokio::spawn(Peers::of(&app).follow(app.bus.subscribe(), background.clone()));
    let singletons_stop = CancellationToken::new();
    let started = tokio::spawn(start_adapters(
        Arc::clone(&app.supervisor),
        Arc::clone(&app.components),
        Singletons::new(
            Arc::clone(&app.supervisor),
            app.db.clone(),
            app.replica.clone(),
        ),
        background.clone(),
        singletons_stop.clone(),
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
            replica: app.replica.clone(),
        }
        .run(jobs_stop.clone()),
    );
    housekeeping(&app, background.clone())?;
    tokio::spawn(Arc::clone(&app.webhooks).run(background.clone()));
    retention::start(
        &app.db,
        app.config.retention.clone(),
        app.config.runs.events_kept(),
        app.replica.clone(),
        background.clone(),
    );
    tokio::spawn(
        Resumer {
            db: app.db.clone(),
            engine: Arc::clone(&app.engine),
            replica: app.replica.clone(),
            timeout: app.config.approvals.timeout(),
            wake: Arc::clone(&app.approvals_decided),
            bus: Arc::clone(&app.bus),
        }
        .run(app.shutdown.clone()),
    );

    http::listener::serve(listener, router, limits, shutdown).await;
    // No new jobs; running ones finish within the grace period.
    jobs_stop.cancel();
    let _ = worker.await;
    // Start-up and the watcher end before anything stops, so nothing starts after the stops.
    background.cancel();
    let singletons = started.await.ok().flatten();
    app.supervisor.stop_all().await;
    // Stopped here, the natives are released for another replica to take over at once.
    singletons_stop.cancel();
    if let Some(singletons) = singletons {
        let _ = singletons.await;
    }
    app.mcp.stop().await;
    app.a2a.stop().await;
    activity_stop.cancel();
    let _ = activity.await;
    presence_stop.cancel();
    let _ = presence.await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts the native adapters this replica runs (and keeps their leases until
/// `singletons_stop`, in the task it returns), loads the components, then watches the
/// adapters folder (hot reload) until `stop`.
async fn start_adapters(
    supervisor: Arc<Supervisor>,
    components: Arc<wasm::Components>,
    mut singletons: Singletons,
    stop: CancellationToken,
    singletons_stop: CancellationToken,
) -> Option<JoinHandle<()>> {
    // Components show as loading from the start, not as unknown while the natives start.
    let found = components.announce();
    singletons.first_round().await;
    supervisor.start_natives().await;
    let singletons = tokio::spawn(singletons.keep(singletons_stop));
    tokio::select! {
        () = components.discover(found) => {}
        () = stop.cancelled() => return Some(singletons),
    }
    supervisor.mark_ready();
    wasm::watch(components, stop).await;
    Some(singletons)
}

/// Keeps what adapters leave behind within its bounds, on a connection of its own: finished
/// jobs past `[jobs] keep_finished` per adapter every 10 s, expired kv entries (a day's worth
/// of event claims, say) hourly; both at start too.
fn housekeeping(app: &App, stop: CancellationToken) -> anyhow::Result<()> {
    let db = app.db.another()?;
    let keep = app.config.jobs.keep_finished();
    let audit_keep_ms = app.config.auth.audit_keep().as_millis() as i64;
    let audit_max_rows = app.config.auth.audit_max_rows();
    tokio::spawn(async move {
        let mut often = tokio::time::interval(Duration::from_secs(10));
        let mut hourly = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = often.tick() => {
                    match db.call(move |conn| job_queue::forget_finished(conn, keep)).await {
                        Ok(0) => {}
                        Ok(gone) => tracing::debug!(gone, "deleted finished jobs past [jobs] keep_finished"),
                        Err(e) => tracing::warn!("cannot delete old finished jobs: {e}"),
                    }
                    let trimmed = db.call(move |conn| audit::trim(conn, audit_keep_ms, audit_max_rows));
                    if let Err(e) = trimmed.await {
                        tracing::warn!("cannot trim the audit log: {e}");
                    }
                    if let Err(e) = db.call(|conn| budget::trim(conn)).await {
                        tracing::warn!("cannot delete past minutes' run counts: {e}");
                    }
                    let ended = db.call(|conn| {
                        Ok(sessions::trim(conn)? + links::trim(conn)? + single_sign_on::trim(conn)?)
                    });
                    if let Err(e) = ended.await {
                        tracing::warn!("cannot delete expired sessions and links: {e}");
                    }
                }
                _ = hourly.tick() => {
                    if let Err(e) = db.call(|conn| kv_store::purge_expired(conn)).await {
                        tracing::warn!("cannot purge expired kv entries: {e}");
                    }

                }
                () = stop.cancelled() => return,
            }
        }
    });
    Ok(())
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
