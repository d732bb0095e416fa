//! One owner of every adapter's lifecycle, native or component, split by job: `lifecycle`
//! (install, start and stop in order under one lock, with deadlines; a hook that fails, panics
//! or hangs is recorded on that adapter's entry and never stops the others), `entries` (what
//! the registry says of a runner installed or looked at again, and the place kept for an
//! adapter that has none yet), `choices` (the operator's
//! enable/disable, kept across restarts; settings that hold one back; another replica running
//! it) and `dispatch` (requests). Behaviour comes from what a [`Managed`] says of itself; the
//! one difference of kind kept here is that a native adapter is never removed or replaced by a
//! component's load.

mod choices;
mod dispatch;
mod entries;
mod lifecycle;

pub use choices::ToggleError;
pub use dispatch::Refusal;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use service_contract::{AdapterContext, AdapterRegistry};

use super::managed::Managed;
use crate::db::Db;

/// How long `start` and `stop` may take.
pub const START_LIMIT: Duration = Duration::from_secs(10);
pub const STOP_LIMIT: Duration = Duration::from_secs(5);

const DISABLED: &str = "disabled from the dashboard";

struct Slot {
    /// `None` while it loads, or when it could not be loaded.
    runner: Option<Arc<dyn Managed>>,
    native: bool,
    /// While it runs: when it was started (a sequence number, for the stop order).
    started: Option<u64>,
    /// Without a runner: what its requests are told (503).
    vacancy: Option<String>,
}

pub struct Supervisor {
    context: Arc<AdapterContext>,
    db: Db,
    slots: RwLock<BTreeMap<String, Slot>>,
    /// The operator's choice.
    disabled: RwLock<HashSet<String>>,
    /// Kept from starting by a setting, with the reason.
    held_back: RwLock<HashMap<String, String>>,
    /// Each adapter's last activity before this start, restored onto its entry.
    activity: RwLock<HashMap<String, String>>,
    /// Natives another replica runs (or that wait to learn which one does), with the reason.
    standby: RwLock<HashMap<String, String>>,
    /// Taken by everything that runs `start` or `stop`, so hooks never interleave and never
    /// run twice for one change.
    lifecycle: tokio::sync::Mutex<()>,
    starts: AtomicU64,
    /// Notified when an adapter starts serving (its waiting jobs can run now).
    serving: Arc<tokio::sync::Notify>,
    /// Whether start-up (natives started, components loaded) is over.
    ready: std::sync::atomic::AtomicBool,
    start_limit: Duration,
    stop_limit: Duration,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Supervisor {
    pub fn new(context: Arc<AdapterContext>, db: Db, serving: Arc<tokio::sync::Notify>) -> Self {
        Self {
            serving,
            context,
            db,
            slots: RwLock::default(),
            disabled: RwLock::default(),
            held_back: RwLock::default(),
            standby: RwLock::default(),
            activity: RwLock::default(),
            lifecycle: tokio::sync::Mutex::new(()),
            starts: AtomicU64::new(0),
            ready: std::sync::atomic::AtomicBool::new(false),
            start_limit: START_LIMIT,
            stop_limit: STOP_LIMIT,
        }
    }

    /// Shorter hook deadlines, for tests of hanging adapters.
    pub fn with_limits(mut self, start: Duration, stop: Duration) -> Self {
        self.start_limit = start;
        self.stop_limit = stop;
        self
    }

    pub fn context(&self) -> &Arc<AdapterContext> {
        &self.context
    }

    pub fn registry(&self) -> &Arc<AdapterRegistry> {
        &self.context.registry
    }

    /// Start-up is over: every adapter found at start has started or failed.
    pub fn mark_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Why an adapter is off (held back, disabled or on standby), if it is.
    fn off(&self, name: &str) -> Option<String> {
        if let Some(reason) = read(&self.held_back).get(name) {
            return Some(reason.clone());
        }
        if read(&self.disabled).contains(name) {
            return Some(DISABLED.to_owned());
        }
        read(&self.standby).get(name).cloned()
    }

    fn runner_of(&self, name: &str) -> Option<Arc<dyn Managed>> {
        read(&self.slots).get(name)?.runner.clone()
    }

    /// The runner of `name` when it is of type `T` (a component generation, say).
    pub fn runner<T: Managed>(&self, name: &str) -> Option<Arc<T>> {
        let runner: Arc<dyn std::any::Any + Send + Sync> = self.runner_of(name)?;
        runner.downcast::<T>().ok()
    }

    /// Every runner of type `T`, by name.
    pub fn runners<T: Managed>(&self) -> Vec<Arc<T>> {
        let names: Vec<String> = read(&self.slots).keys().cloned().collect();
        names
            .iter()
            .filter_map(|name| self.runner::<T>(name))
            .collect()
    }

    /// Natives that may run on this replica: installed, not held back by a setting.
    pub fn natives(&self) -> Vec<String> {
        let held_back = read(&self.held_back);
        read(&self.slots)
            .iter()
            .filter(|(name, slot)| {
                slot.native && slot.runner.is_some() && !held_back.contains_key(*name)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn is_native(&self, name: &str) -> bool {
        read(&self.slots).get(name).is_some_and(|s| s.native)
    }

    /// Installed and neither disabled nor held back: its requests, jobs and tools run.
    pub fn is_serving(&self, name: &str) -> bool {
        self.runner_of(name).is_some() && self.off(name).is_none()
    }

    fn errors(&self, name: &str) -> u64 {
        self.registry().get(name).map_or(0, |e| e.error_count)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use tower::ServiceExt;

    use futures_util::FutureExt;
    use service_contract::{
        Adapter, AdapterError, AdapterStatus, Hook, HttpRequest, HttpResponse, Routes,
    };

    use super::*;
    use crate::app::App;
    use crate::http::{AppState, guards::Binding, router};

    /// A supervisor of these native adapters, on a fresh data directory.
    fn supervise(
        app: &App,
        natives: Vec<Arc<dyn Adapter>>,
        limits: Option<Duration>,
    ) -> Arc<Supervisor> {
        let mut supervisor = Supervisor::new(
            Arc::clone(app.supervisor.context()),
            app.db.clone(),
            Arc::default(),
        );
        if let Some(limit) = limits {
            supervisor = supervisor.with_limits(limit, limit);
        }
        for native in natives {
            supervisor.add_native(native);
        }
        Arc::new(supervisor)
    }

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
        let app = App::open(tmp.path(), crate::app::Role::Server)
            .await
            .unwrap();
        let log = Arc::new(StdMutex::new(Vec::new()));
        let fake = |name, behaviour| {
            Arc::new(Fake {
                name,
                behaviour,
                log: Arc::clone(&log),
            }) as Arc<dyn Adapter>
        };
        let adapters = supervise(
            &app,
            vec![
                fake("e-hang", "hang"),
                fake("a-good", "ok"),
                fake("c-panic", "panic"),
                fake("b-fail", "fail"),
                fake("d-config", "no-secret"),
                fake("f-half", "start-only"),
            ],
            Some(Duration::from_millis(200)),
        );
        adapters.start_natives().await;

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
        // Those whose start failed never ran, so nothing stops them.
        assert_eq!(stops, ["stop d-config", "stop a-good"], "reverse order");
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
        let app = App::open(tmp.path(), crate::app::Role::Server)
            .await
            .unwrap();
        let pinger = Arc::new(Pinger::default());
        let adapters = supervise(&app, vec![Arc::clone(&pinger) as Arc<dyn Adapter>], None);
        adapters.start_natives().await;
        let mut state = AppState::new(&app, Binding { loopback: true }).unwrap();
        state.adapters = Arc::clone(&adapters);
        let service = router(state, Default::default());
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
        assert_eq!(status, 405, "{body}");
        assert!(body.contains("POST /ping is served for GET only"), "{body}");
        let (status, _, body) = call("GET", "/api/adapters/pinger/nowhere").await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("no route GET /nowhere"), "{body}");

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
        assert_eq!(call("GET", "/api/adapters/nobody/ping").await.0, 404);
    }
}
