//! One loaded version of a component, as the supervisor runs it. Calls in flight keep the
//! generation they started on; a request reaches the guest only on a route it declared. A
//! generation first loaded with the baseline compiler gets its optimized code later
//! (`Loader::optimize`): calls that start after run it, calls in flight finish on the code they
//! began with.

use std::sync::{Arc, PoisonError, RwLock};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::{
    AdapterEntry, AdapterError, AdapterKind, ConfigProblem, FailureKind, HttpRequest, HttpResponse,
    Missing, Route,
};
use wasmtime::component::InstancePre;

use super::caps::RunContext;
use super::exports::{
    CallTool, Exports, HandleHttp, Hook, JobFailure, ListTools, OfferedTool, RunJob, Version,
};
use super::grants::{Origin, Request};
use super::sandbox::{AdapterPlace, Prepared, Sandbox, Wait};
use super::state::{HostState, JobContext};
use crate::adapters::{CallError, Managed, START_LIMIT, STOP_LIMIT, no_route};

/// The registry metadata key that says which compiler's code a component runs.
pub(crate) const CODE: &str = "code";
/// Its values: Winch's while Cranelift works behind it, then Cranelift's.
pub(crate) const BASELINE: &str = "baseline (Winch)";
pub const OPTIMIZED: &str = "optimized (Cranelift)";

pub struct Generation {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub metadata: Vec<(String, String)>,
    pub serves: Serves,
    /// What it asked for.
    pub request: Request,
    /// Its code, linked, with its grant; replaced once by the optimized code.
    code: RwLock<Arc<Prepared>>,
    /// While it runs baseline code: what the optimizing compiler needs.
    unoptimized: std::sync::Mutex<Option<Unoptimized>>,
    /// Whether its code is the optimizing compiler's.
    optimized: tokio::sync::watch::Sender<bool>,
    pub sandbox: Arc<Sandbox>,
}

/// The component a baseline generation came from, for its optimized code.
pub struct Unoptimized {
    pub bytes: Vec<u8>,
    pub contract: Version,
}

/// The requests a generation takes.
pub enum Serves {
    /// The routes it declared.
    Routes(Vec<Route>),
    /// Every method and path under its prefix (a `wasi:http` component).
    Everything,
}

/// The failure of a call that has no HTTP client to answer.
fn failure(e: CallError) -> AdapterError {
    match e {
        CallError::Failed(e) => e,
        CallError::Busy(message) => AdapterError::new(FailureKind::HostError, message),
    }
}

impl Generation {
    /// A generation running `prepared`; `unoptimized` when that is baseline code.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        version: String,
        sha256: String,
        metadata: Vec<(String, String)>,
        serves: Serves,
        request: Request,
        prepared: Prepared,
        unoptimized: Option<Unoptimized>,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        let (optimized, _) = tokio::sync::watch::channel(unoptimized.is_none());
        Self {
            name,
            version,
            sha256,
            metadata,
            serves,
            request,
            code: RwLock::new(Arc::new(prepared)),
            unoptimized: std::sync::Mutex::new(unoptimized),
            optimized,
            sandbox,
        }
    }

    /// Its code as it is now.
    pub fn prepared(&self) -> Arc<Prepared> {
        Arc::clone(&self.code.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// What the optimizing compiler needs, once: `None` when its code is optimized already.
    pub(crate) fn take_unoptimized(&self) -> Option<Unoptimized> {
        self.unoptimized
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Runs the optimized code from the next call on (same grant, same place).
    pub fn optimize(&self, pre: InstancePre<HostState>, exports: Exports) {
        let current = self.prepared();
        let optimized = Prepared::new(pre, exports, Arc::clone(&current.caller));
        *self.code.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(optimized);
        self.optimized.send_replace(true);
    }

    pub(crate) fn is_optimized(&self) -> bool {
        *self.optimized.borrow()
    }

    /// Waits until it runs optimized code.
    pub async fn until_optimized(&self) {
        let mut optimized = self.optimized.subscribe();
        let _ = optimized.wait_for(|o| *o).await;
    }

    /// Interfaces it imports but was granted nothing of (a call to one is refused).
    pub fn ungranted(&self) -> Vec<&'static str> {
        self.prepared().caller.granted.ungranted(&self.request)
    }

    /// A grant file that would cover every import it was granted nothing of.
    pub fn suggested_grant(&self) -> String {
        self.prepared()
            .caller
            .granted
            .suggested_grant(&self.request)
    }

    /// Whether its grant lets it send requests to `url`; the refusal says why not.
    pub fn may_reach(&self, url: &str) -> Result<(), String> {
        let origin = reqwest::Url::parse(url)
            .ok()
            .and_then(|url| Origin::of(&url))
            .ok_or_else(|| format!("{url:?} is not a URL"))?;
        if self
            .prepared()
            .caller
            .granted
            .outbound_http
            .origins
            .contains(&origin)
        {
            return Ok(());
        }
        Err(format!(
            "the {} adapter may not reach {origin}: its grant does not name that origin",
            self.name
        ))
    }

    /// Whether the same component under the same grant already serves as `other`.
    pub(crate) fn same_as(&self, other: &Generation) -> bool {
        self.sha256 == other.sha256
            && self.prepared().caller.granted == other.prepared().caller.granted
    }

    /// Its `start` or `stop`, within the supervisor's hook deadlines.
    async fn hook(&self, start: bool) -> Result<(), AdapterError> {
        let limit = if start { START_LIMIT } else { STOP_LIMIT };
        let outcome = self
            .sandbox
            .call(&self.prepared(), Hook(start), limit, Wait::Yes)
            .await
            .map_err(failure)?;
        outcome.map_err(|message| {
            let hook = if start { "start" } else { "stop" };
            AdapterError::new(FailureKind::HookError, format!("{hook} failed: {message}"))
        })
    }

    /// A place among its instances for a job, if one is free now within the background share.
    pub(crate) fn free_place(&self) -> Option<AdapterPlace> {
        AdapterPlace::try_take(&self.prepared().caller)
    }

    /// Runs a job's payload in the instance place the worker took for it; agent runs it
    /// starts report to the job's task.
    pub async fn run_job(
        &self,
        job: JobContext,
        payload: Vec<u8>,
        place: AdapterPlace,
    ) -> Result<(), JobFailure> {
        let prepared = self.prepared();
        let limit = prepared.caller.granted.limits.run_job();
        let run = RunJob { job, payload };
        match self
            .sandbox
            .call(&prepared, run, limit, Wait::Holding(place))
            .await
        {
            Ok(outcome) => outcome,
            Err(e) => {
                let e = failure(e);
                prepared.caller.record(&e.kind, &e.message);
                Err(JobFailure {
                    message: format!("adapter {:?} failed: {e}", self.name),
                    retry_after_ms: None,
                })
            }
        }
    }

    /// The tools it offers (called once when it loads).
    pub async fn list_tools(&self) -> Result<Vec<OfferedTool>, AdapterError> {
        let prepared = self.prepared();
        let limit = prepared.caller.granted.limits.handle_http();
        self.sandbox
            .call(&prepared, ListTools, limit, Wait::Yes)
            .await
            .map_err(failure)
    }

    /// Calls one of its tools for an agent run (`run`). It does not wait for an instance: the
    /// caller may itself be a component call holding one.
    pub async fn call_tool(
        &self,
        name: String,
        args_json: String,
        run: Option<RunContext>,
    ) -> Result<String, String> {
        let prepared = self.prepared();
        let limit = prepared.caller.granted.limits.handle_http();
        let call = CallTool {
            name,
            args_json,
            run,
        };
        match self.sandbox.call(&prepared, call, limit, Wait::No).await {
            Ok(answer) => answer,
            Err(CallError::Busy(message)) => Err(message),
            Err(CallError::Failed(e)) => {
                prepared.caller.record(&e.kind, &e.message);
                Err(format!("adapter {:?} failed: {e}", self.name))
            }
        }
    }
}

impl Managed for Generation {
    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self, entry: &mut AdapterEntry) {
        entry.kind = AdapterKind::Wasm;
        entry.version = (!self.version.is_empty()).then(|| self.version.clone());
        entry.capabilities = self.prepared().caller.granted.summary();
        entry.supports_toggle = self.toggleable();
        entry.metadata = self.metadata.iter().cloned().collect();
        let code = if self.is_optimized() {
            OPTIMIZED
        } else {
            BASELINE
        };
        entry.metadata.insert(CODE.into(), code.into());
        let ungranted = self.ungranted();
        if !ungranted.is_empty() {
            // Harmless until called, but the operator should know.
            entry
                .metadata
                .insert("ungranted_imports".into(), ungranted.join(", "));
        }
    }

    fn toggleable(&self) -> bool {
        self.prepared().exports.has_lifecycle()
    }

    fn start(&self) -> BoxFuture<'_, Result<(), AdapterError>> {
        self.hook(true).boxed()
    }

    fn stop(&self) -> BoxFuture<'_, Result<(), AdapterError>> {
        self.hook(false).boxed()
    }

    fn handle_http(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, CallError>> {
        async move {
            if let Serves::Routes(routes) = &self.serves
                && !routes
                    .iter()
                    .any(|route| route.matches(&request.method, &request.path))
            {
                return Ok(no_route(routes.iter(), &request));
            }
            let prepared = self.prepared();
            let limit = prepared.caller.granted.limits.handle_http();
            self.sandbox
                .call(&prepared, HandleHttp(request), limit, Wait::No)
                .await
        }
        .boxed()
    }

    /// Required secrets that are unset (it waits for them), or not granted (its grant is
    /// wrong).
    fn config_problem(&self) -> Option<ConfigProblem> {
        let prepared = self.prepared();
        let caller = &prepared.caller;
        let secrets = &caller.granted.secrets;
        let missing: Vec<String> = secrets
            .required
            .iter()
            .filter(|name| caller.services.env.get(name).is_none())
            .cloned()
            .collect();
        if secrets.required_ungranted.is_empty() {
            return (!missing.is_empty()).then_some(ConfigProblem::Missing(Missing::All(missing)));
        }
        let problems: Vec<String> = missing
            .iter()
            .map(|name| format!("{name} is not set"))
            .chain(
                secrets
                    .required_ungranted
                    .iter()
                    .map(|name| format!("{name} is required but its grant does not name it")),
            )
            .collect();
        Some(ConfigProblem::Invalid(problems.join("; ")))
    }

    /// Its granted secrets and the variables naming the origins it may reach.
    fn settings(&self) -> Vec<String> {
        let prepared = self.prepared();
        let granted = &prepared.caller.granted;
        granted
            .secrets
            .names
            .iter()
            .chain(&granted.outbound_http.variables)
            .cloned()
            .collect()
    }
}
