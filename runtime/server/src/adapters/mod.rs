//! The adapters of the running server: discovery into the registry, start at boot, stop at
//! shutdown (in reverse order), and the enable/disable toggle. A hook that fails, panics or
//! hangs is recorded on that adapter's registry entry; it never stops the others.

mod records;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use service_contract::{
    Adapter, AdapterContext, AdapterEntry, AdapterError, AdapterKind, AdapterRegistry,
    AdapterStatus, Hook, HttpRequest, HttpResponse, Routes,
};
use tokio::sync::Mutex;

pub use records::{DbFeedback, DbTasks};

use crate::db::{self, Db};
use crate::error::{Error, Result};

/// Adapters the operator disabled from the dashboard (the choice survives restarts).
pub async fn disabled_names(db: &Db) -> Result<Vec<String>> {
    db.call(|conn| {
        let mut stmt = conn.prepare("SELECT name FROM adapter_state WHERE enabled = 0")?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(names.collect::<rusqlite::Result<Vec<_>>>()?)
    })
    .await
}

/// Persists an enable/disable choice.
pub async fn remember_toggle(db: &Db, name: &str, enable: bool) -> Result<()> {
    let name = name.to_owned();
    db.call(move |conn| {
        conn.execute(
            "INSERT INTO adapter_state (name, enabled, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
            rusqlite::params![name, enable, db::now()],
        )?;
        Ok(())
    })
    .await
}

/// A JSON error answer, as every API error is.
fn plain(status: u16, message: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::json!({ "error": message })
            .to_string()
            .into_bytes(),
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "it panicked".to_owned())
}

const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a native route may take to answer.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an enable or disable request failed.
#[derive(Debug, thiserror::Error)]
pub enum ToggleError {
    #[error("no adapter named {0:?}")]
    Unknown(String),
    #[error("adapter {0:?} cannot be enabled or disabled: it has no start and stop")]
    NotToggleable(String),
    #[error("{0}")]
    HookFailed(AdapterError),
    #[error(transparent)]
    Internal(#[from] Error),
}

pub struct Adapters {
    context: Arc<AdapterContext>,
    start_timeout: Duration,
    stop_timeout: Duration,
    /// Sorted by name: the start order; shutdown walks it backwards.
    native: Vec<Arc<dyn Adapter>>,
    db: Db,
    /// One toggle at a time, so start and stop of one adapter never interleave.
    toggling: Mutex<()>,
    /// The routes each adapter mounted in `bind`.
    routes: RwLock<HashMap<String, Arc<Routes>>>,
}

fn supports_toggle(adapter: &dyn Adapter, ctx: &Arc<AdapterContext>) -> bool {
    // Presence test: the hooks are only built, never polled, here.
    adapter.start(ctx).is_some() && adapter.stop().is_some()
}

impl Adapters {
    /// Registers every adapter as a `stopped` entry.
    pub fn new(context: Arc<AdapterContext>, mut native: Vec<Arc<dyn Adapter>>, db: Db) -> Self {
        native.sort_by(|a, b| a.name().cmp(b.name()));
        for adapter in &native {
            let mut entry = AdapterEntry::new(adapter.name(), AdapterKind::Native);
            entry.supports_toggle = supports_toggle(adapter.as_ref(), &context);
            entry.version = adapter.describe()["version"].as_str().map(str::to_owned);
            context.registry.insert(entry);
        }
        Self {
            context,
            start_timeout: START_TIMEOUT,
            stop_timeout: STOP_TIMEOUT,
            native,
            db,
            toggling: Mutex::new(()),
            routes: RwLock::default(),
        }
    }

    /// Shorter hook deadlines, for tests of hanging adapters.
    pub fn with_timeouts(mut self, start: Duration, stop: Duration) -> Self {
        self.start_timeout = start;
        self.stop_timeout = stop;
        self
    }

    pub fn context(&self) -> &Arc<AdapterContext> {
        &self.context
    }

    pub fn registry(&self) -> &Arc<AdapterRegistry> {
        &self.context.registry
    }

    fn find(&self, name: &str) -> Option<&Arc<dyn Adapter>> {
        self.native.iter().find(|a| a.name() == name)
    }

    /// Binds and starts every adapter, except those the operator disabled (persisted toggle)
    /// or that `held_back` names with a reason.
    pub async fn start_all(&self, held_back: &HashMap<&str, String>) -> Result<()> {
        let disabled = disabled_names(&self.db).await?;
        for adapter in &self.native {
            let name = adapter.name();
            let mut routes = Routes::default();
            if let Err(e) = adapter.bind(&mut routes, &self.context) {
                self.registry().mark_error(name, &e.kind, &e.message);
                continue;
            }
            if !routes.is_empty() {
                self.routes
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(name.to_owned(), Arc::new(routes));
            }
            if let Some(reason) = held_back.get(name) {
                self.registry().mark_stopped_because(name, reason);
            } else if disabled.iter().any(|d| d == name) {
                self.registry()
                    .mark_stopped_because(name, "disabled from the dashboard");
            } else {
                // A failure is already on the registry entry; the others start regardless.
                let _ = self.start(adapter.as_ref()).await;
            }
        }
        Ok(())
    }

    /// Answers a request to a native adapter's routes. `Err` hands the request back when `name`
    /// mounted no routes (a component may serve it).
    pub async fn handle_http(
        &self,
        name: &str,
        request: HttpRequest,
    ) -> std::result::Result<HttpResponse, HttpRequest> {
        let routes = self
            .routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        let Some(routes) = routes else {
            return Err(request);
        };
        let Some(handler) = routes.find(&request.method, &request.path) else {
            return Ok(plain(
                404,
                &format!("no route {} {}", request.method, request.path),
            ));
        };
        if self
            .registry()
            .get(name)
            .is_some_and(|e| e.status == AdapterStatus::Stopped)
        {
            return Ok(plain(503, &format!("adapter {name:?} is stopped")));
        }
        // A handler that panics or hangs is the adapter's failure, recorded like a hook's.
        let outcome = tokio::time::timeout(
            ROUTE_TIMEOUT,
            AssertUnwindSafe(handler(request)).catch_unwind(),
        )
        .await;
        let (kind, message, status) = match outcome {
            Ok(Ok(response)) => {
                if response.status < 400 {
                    self.registry().touch(name);
                }
                return Ok(response);
            }
            Ok(Err(panic)) => ("Panic", panic_message(panic.as_ref()), 500),
            Err(_) => (
                "Timeout",
                format!("no answer within {ROUTE_TIMEOUT:?}"),
                503,
            ),
        };
        self.registry().mark_error(name, kind, &message);
        Ok(plain(
            status,
            &format!(
                "adapter {name:?} failed ({kind}); its entry in /api/adapters has the details"
            ),
        ))
    }

    /// Stops every adapter that has a `stop`, in reverse start order.
    pub async fn stop_all(&self) {
        for adapter in self.native.iter().rev() {
            let _ = self.stop(adapter.as_ref()).await;
        }
    }

    async fn start(&self, adapter: &dyn Adapter) -> std::result::Result<(), AdapterError> {
        let name = adapter.name();
        let Some(hook) = adapter.start(&self.context) else {
            // Nothing to launch: the adapter is ready once bound.
            self.registry().mark_running(name);
            return Ok(());
        };
        let errors_before = self.registry().get(name).map_or(0, |e| e.error_count);
        self.run_hook(name, hook, self.start_timeout).await?;
        // An adapter that found a missing setting records an error and returns Ok (spec 3.2
        // rule 5): it is not running then.
        if self.registry().get(name).map_or(0, |e| e.error_count) == errors_before {
            self.registry().mark_running(name);
        }
        Ok(())
    }

    async fn stop(&self, adapter: &dyn Adapter) -> std::result::Result<(), AdapterError> {
        let name = adapter.name();
        if let Some(hook) = adapter.stop() {
            self.run_hook(name, hook, self.stop_timeout).await?;
        }
        self.registry().mark_stopped(name);
        Ok(())
    }

    /// Awaits a hook, turning an error, a panic or a timeout into a registry error.
    async fn run_hook(
        &self,
        name: &str,
        hook: Hook<'_>,
        limit: Duration,
    ) -> std::result::Result<(), AdapterError> {
        let outcome = tokio::time::timeout(limit, AssertUnwindSafe(hook).catch_unwind()).await;
        let error = match outcome {
            Ok(Ok(Ok(()))) => return Ok(()),
            Ok(Ok(Err(e))) => e,
            Ok(Err(panic)) => AdapterError::new("Panic", panic_message(panic.as_ref())),
            Err(_) => AdapterError::new(
                "Timeout",
                format!("the hook did not finish within {limit:?}"),
            ),
        };
        tracing::warn!(adapter = name, "{error}");
        self.registry()
            .mark_error(name, &error.kind, &error.message);
        Err(error)
    }

    /// Runs `start` (enable) or `stop` (disable) and remembers the choice across restarts.
    pub async fn toggle(
        &self,
        name: &str,
        enable: bool,
    ) -> std::result::Result<AdapterEntry, ToggleError> {
        let _one_at_a_time = self.toggling.lock().await;
        let adapter = self
            .find(name)
            .ok_or_else(|| ToggleError::Unknown(name.to_owned()))?;
        if !supports_toggle(adapter.as_ref(), &self.context) {
            return Err(ToggleError::NotToggleable(name.to_owned()));
        }
        let status = self.registry().get(name).map(|e| e.status);
        let already = match enable {
            true => status == Some(AdapterStatus::Running),
            false => status == Some(AdapterStatus::Stopped),
        };
        let result = if already {
            // No hook runs twice (a second gateway connection, say); the choice is kept.
            Ok(())
        } else if enable {
            self.start(adapter.as_ref()).await
        } else {
            self.stop(adapter.as_ref()).await
        };
        remember_toggle(&self.db, name, enable).await?;
        if !enable {
            self.registry()
                .mark_stopped_because(name, "disabled from the dashboard");
        }
        result.map_err(ToggleError::HookFailed)?;
        self.registry()
            .get(name)
            .ok_or_else(|| ToggleError::Unknown(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use tower::ServiceExt;

    use super::*;
    use crate::app::App;
    use crate::http::{AppState, guards::Binding, router};

    /// An adapter whose start does what `behaviour` says, and which logs its hooks.
    struct Fake {
        name: &'static str,
        behaviour: &'static str,
        log: Arc<StdMutex<Vec<String>>>,
    }

    impl Adapter for Fake {
        fn name(&self) -> &str {
            self.name
        }

        fn start<'a>(&'a self, ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
            Some(
                async move {
                    self.log
                        .lock()
                        .unwrap()
                        .push(format!("start {}", self.name));
                    match self.behaviour {
                        "fail" => Err(AdapterError::new("IoError", "port in use")),
                        "panic" => panic!("boom in start"),
                        "hang" => std::future::pending().await,
                        "no-secret" => {
                            ctx.registry.mark_error(
                                self.name,
                                "ConfigError",
                                "SERVICE_X_TOKEN is not set",
                            );
                            Ok(())
                        }
                        _ => Ok(()),
                    }
                }
                .boxed(),
            )
        }

        fn stop(&self) -> Option<Hook<'_>> {
            (self.behaviour != "start-only").then(|| {
                async move {
                    self.log.lock().unwrap().push(format!("stop {}", self.name));
                    Ok(())
                }
                .boxed()
            })
        }
    }

    #[tokio::test]
    async fn failures_are_contained_and_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path()).unwrap();
        let log = Arc::new(StdMutex::new(Vec::new()));
        let fake = |name, behaviour| {
            Arc::new(Fake {
                name,
                behaviour,
                log: Arc::clone(&log),
            }) as Arc<dyn Adapter>
        };
        let adapters = Adapters::new(
            Arc::clone(app.adapters.context()),
            vec![
                fake("e-hang", "hang"),
                fake("a-good", "ok"),
                fake("c-panic", "panic"),
                fake("b-fail", "fail"),
                fake("d-config", "no-secret"),
                fake("f-half", "start-only"),
            ],
            app.db.clone(),
        )
        .with_timeouts(Duration::from_millis(200), Duration::from_millis(200));
        adapters.start_all(&HashMap::new()).await.unwrap();

        let entry = |name: &str| adapters.registry().get(name).unwrap();
        assert_eq!(entry("a-good").status, AdapterStatus::Running);
        assert_eq!(
            entry("b-fail").error_message.as_deref(),
            Some("IoError: port in use")
        );
        assert_eq!(
            entry("c-panic").error_message.as_deref(),
            Some("Panic: boom in start")
        );
        assert!(
            entry("e-hang")
                .error_message
                .unwrap()
                .starts_with("Timeout:")
        );
        let config = entry("d-config");
        assert_eq!(
            (config.status, config.error_count),
            (AdapterStatus::Error, 1),
            "not marked running over its own error"
        );
        assert_eq!(entry("f-half").status, AdapterStatus::Running);
        assert!(!entry("f-half").supports_toggle && entry("a-good").supports_toggle);
        assert!(matches!(
            adapters.toggle("f-half", false).await,
            Err(ToggleError::NotToggleable(_))
        ));

        log.lock().unwrap().clear();
        adapters.stop_all().await;
        let stops: Vec<String> = log.lock().unwrap().clone();
        assert_eq!(
            stops,
            [
                "stop e-hang",
                "stop d-config",
                "stop c-panic",
                "stop b-fail",
                "stop a-good"
            ],
            "reverse order"
        );
    }

    /// Mounts `GET /ping` and a route that panics, and counts its starts.
    #[derive(Default)]
    struct Pinger {
        starts: std::sync::atomic::AtomicUsize,
    }

    impl Adapter for Pinger {
        fn name(&self) -> &str {
            "pinger"
        }

        fn bind(
            &self,
            routes: &mut Routes,
            _ctx: &Arc<AdapterContext>,
        ) -> Result<(), AdapterError> {
            routes.add("GET", "/boom", |_: HttpRequest| async move {
                panic!("the route fell over")
            })?;
            routes.add("GET", "/ping", |request: HttpRequest| async move {
                HttpResponse {
                    status: 200,
                    headers: vec![("x-query".into(), request.query)],
                    body: b"pong".to_vec(),
                }
            })
        }

        fn start<'a>(&'a self, _ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
            Some(
                async move {
                    self.starts
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                }
                .boxed(),
            )
        }

        fn stop(&self) -> Option<Hook<'_>> {
            Some(async { Ok(()) }.boxed())
        }
    }

    #[tokio::test]
    async fn native_routes_are_served_under_the_adapters_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path()).unwrap();
        let pinger = Arc::new(Pinger::default());
        let adapters = Arc::new(Adapters::new(
            Arc::clone(app.adapters.context()),
            vec![Arc::clone(&pinger) as Arc<dyn Adapter>],
            app.db.clone(),
        ));
        adapters.start_all(&HashMap::new()).await.unwrap();
        let mut state = AppState::new(&app).unwrap();
        state.adapters = Arc::clone(&adapters);
        let service = router(state, Binding { loopback: true });
        let call = |method: &str, path: &str| {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "127.0.0.1")
                .extension(ConnectInfo(std::net::SocketAddr::from((
                    [127, 0, 0, 1],
                    4000,
                ))))
                .body(Body::empty())
                .unwrap();
            let service = service.clone();
            async move {
                let response = service.oneshot(request).await.unwrap();
                let status = response.status().as_u16();
                let query = response
                    .headers()
                    .get("x-query")
                    .map(|v| v.to_str().unwrap().to_owned());
                let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                    .await
                    .unwrap();
                (status, query, String::from_utf8(body.to_vec()).unwrap())
            }
        };

        let (status, query, body) = call("GET", "/api/adapters/pinger/ping?n=1").await;
        assert_eq!(
            (status, query.as_deref(), body.as_str()),
            (200, Some("n=1"), "pong")
        );
        assert!(
            adapters
                .registry()
                .get("pinger")
                .unwrap()
                .last_activity_at
                .is_some()
        );
        let (status, _, body) = call("POST", "/api/adapters/pinger/ping").await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("no route POST /ping"), "{body}");

        let (status, _, body) = call("GET", "/api/adapters/pinger/boom").await;
        assert_eq!(status, 500, "{body}");
        assert!(
            !body.contains("fell over"),
            "details stay on the entry: {body}"
        );
        let entry = adapters.registry().get("pinger").unwrap();
        assert_eq!(
            entry.error_message.as_deref(),
            Some("Panic: the route fell over")
        );

        adapters.toggle("pinger", false).await.unwrap();
        let (status, _, body) = call("GET", "/api/adapters/pinger/ping").await;
        assert_eq!(status, 503, "{body}");
        adapters.toggle("pinger", true).await.unwrap();
        assert_eq!(call("GET", "/api/adapters/pinger/ping").await.0, 200);
        // Enabling what runs starts nothing twice: one start at boot, one enable.
        adapters.toggle("pinger", true).await.unwrap();
        assert_eq!(pinger.starts.load(std::sync::atomic::Ordering::SeqCst), 2);
        // A name with no native routes goes on to the components.
        assert_eq!(call("GET", "/api/adapters/nobody/ping").await.0, 404);
    }
}
