//! A native adapter (the contract's [`Adapter`]) as the supervisor runs it: its routes mounted
//! in `bind`, its hooks, and a route handler that panics or hangs recorded like any failure.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::{
    Adapter, AdapterContext, AdapterEntry, AdapterError, AdapterKind, FailureKind, HttpRequest,
    HttpResponse, Routes,
};

use super::managed::{CallError, Managed, no_route};

/// How long a native route may take to answer.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) struct Native {
    adapter: Arc<dyn Adapter>,
    ctx: Arc<AdapterContext>,
    routes: Routes,
}

impl Native {
    /// Binds the adapter (it mounts its routes); an error is why it cannot run.
    pub(super) fn bind(
        adapter: Arc<dyn Adapter>,
        ctx: Arc<AdapterContext>,
    ) -> Result<Self, AdapterError> {
        let mut routes = Routes::default();
        adapter.bind(&mut routes, &ctx)?;
        Ok(Self {
            adapter,
            ctx,
            routes,
        })
    }
}

/// What a panic said, when it said it with a string.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "it panicked".to_owned())
}

impl Managed for Native {
    fn name(&self) -> &str {
        self.adapter.name()
    }

    fn describe(&self, entry: &mut AdapterEntry) {
        entry.kind = AdapterKind::Native;
        entry.supports_toggle = self.toggleable();
        entry.version = self.adapter.describe()["version"]
            .as_str()
            .map(str::to_owned);
    }

    fn settings(&self) -> Vec<String> {
        self.adapter
            .settings()
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }

    fn toggleable(&self) -> bool {
        // Presence test: the hooks are only built, never polled, here.
        self.adapter.start(&self.ctx).is_some() && self.adapter.stop().is_some()
    }

    fn start(&self) -> BoxFuture<'_, Result<(), AdapterError>> {
        match self.adapter.start(&self.ctx) {
            Some(hook) => hook,
            None => async { Ok(()) }.boxed(),
        }
    }

    fn stop(&self) -> BoxFuture<'_, Result<(), AdapterError>> {
        match self.adapter.stop() {
            Some(hook) => hook,
            None => async { Ok(()) }.boxed(),
        }
    }

    fn handle_http(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, CallError>> {
        async move {
            let Some(handler) = self.routes.find(&request.method, &request.path) else {
                return Ok(no_route(self.routes.declared(), &request));
            };
            let outcome = tokio::time::timeout(
                ROUTE_TIMEOUT,
                AssertUnwindSafe(handler(request)).catch_unwind(),
            )
            .await;
            let (kind, message) = match outcome {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(panic)) => (FailureKind::Panic, panic_message(panic.as_ref())),
                Err(_) => (
                    FailureKind::Timeout,
                    format!("no answer within {ROUTE_TIMEOUT:?}"),
                ),
            };
            Err(CallError::Failed(AdapterError::new(kind, message)))
        }
        .boxed()
    }
}
