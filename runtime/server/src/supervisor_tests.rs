//! The adapters' supervisor under a real app: native adapters whose start fails, panics or
//! hangs are contained and recorded, and their routes are served under `/api/adapters/`.
//! (Here rather than beside the supervisor: they need the app and its HTTP API.)

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use tower::ServiceExt;

use futures_util::FutureExt;
use service_contract::{
    Adapter, AdapterContext, AdapterError, AdapterStatus, Hook, HttpRequest, HttpResponse, Routes,
};

use crate::adapters::{Supervisor, ToggleError};
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

    fn bind(&self, routes: &mut Routes, _ctx: &Arc<AdapterContext>) -> Result<(), AdapterError> {
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
