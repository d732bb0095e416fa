//! A component's exports, called through the contract version it was built for. Each export
//! the host calls is a [`Call`]; the sandbox runs it.

use std::future::Future;

use serde_json::{Value, json};
use service_contract::HttpRequest;
use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::bindings::{v0_1, v0_2};
use super::caps::RunContext;
use super::grants::Listed;
use super::proxy;
use super::recording::written_bytes;
use super::state::{HostState, JobContext};

/// The contract versions this host loads, oldest first.
pub(crate) const SUPPORTED: &[&str] = &["0.1.0", "0.2.0", "0.2.1", "0.2.2", "0.2.3"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V0_1,
    V0_2,
    /// A standard `wasi:http/proxy` component: it exports `wasi:http/incoming-handler`, and
    /// may import 0.2 interfaces of the contract.
    Proxy,
}

impl Version {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "0.1.0" => Some(Self::V0_1),
            // 0.2.x only adds, so one set of bindings serves them all: the linker gives a
            // 0.2.0 to 0.2.2 import the 0.2.3 definition, a superset.
            "0.2.0" | "0.2.1" | "0.2.2" | "0.2.3" => Some(Self::V0_2),
            _ => None,
        }
    }
}

/// The export indices of a prepared component, by version.
#[derive(Clone)]
pub enum Exports {
    V0_1 {
        handler: v0_1::exports::service::adapter::handler::GuestIndices,
        lifecycle: Option<v0_1::exports::service::adapter::lifecycle::GuestIndices>,
        tools: Option<v0_1::exports::service::adapter::tool_provider::GuestIndices>,
    },
    V0_2 {
        handler: v0_2::exports::service::adapter::handler::GuestIndices,
        lifecycle: Option<v0_2::exports::service::adapter::lifecycle::GuestIndices>,
        tools: Option<v0_2::exports::service::adapter::tool_provider::GuestIndices>,
    },
    Proxy {
        handler: proxy::Indices,
    },
}

impl Exports {
    /// The exports of a component built for `version`; `handler` is required.
    pub fn find(pre: &InstancePre<HostState>, version: Version) -> anyhow::Result<Self> {
        let missing = || {
            anyhow::anyhow!(
                "does not export service:adapter/handler@{}",
                version_text(version)
            )
        };
        if version == Version::Proxy {
            return Ok(Self::Proxy {
                handler: proxy::Indices::new(pre)
                    .map_err(|e| anyhow::anyhow!("its wasi:http/incoming-handler: {e:#}"))?,
            });
        }
        Ok(match version {
            Version::V0_1 => {
                use v0_1::exports::service::adapter::{handler, lifecycle, tool_provider};
                Self::V0_1 {
                    handler: handler::GuestIndices::new(pre).map_err(|_| missing())?,
                    lifecycle: lifecycle::GuestIndices::new(pre).ok(),
                    tools: tool_provider::GuestIndices::new(pre).ok(),
                }
            }
            Version::V0_2 => {
                use v0_2::exports::service::adapter::{handler, lifecycle, tool_provider};
                Self::V0_2 {
                    handler: handler::GuestIndices::new(pre).map_err(|_| missing())?,
                    lifecycle: lifecycle::GuestIndices::new(pre).ok(),
                    tools: tool_provider::GuestIndices::new(pre).ok(),
                }
            }
            Version::Proxy => unreachable!("found above"),
        })
    }

    pub(crate) fn has_lifecycle(&self) -> bool {
        match self {
            Self::V0_1 { lifecycle, .. } => lifecycle.is_some(),
            Self::V0_2 { lifecycle, .. } => lifecycle.is_some(),
            Self::Proxy { .. } => false,
        }
    }

    pub(crate) fn has_tools(&self) -> bool {
        match self {
            Self::V0_1 { tools, .. } => tools.is_some(),
            Self::V0_2 { tools, .. } => tools.is_some(),
            Self::Proxy { .. } => false,
        }
    }
}

fn version_text(version: Version) -> &'static str {
    match version {
        Version::V0_1 => SUPPORTED[0],
        Version::V0_2 | Version::Proxy => SUPPORTED[1],
    }
}

/// One export call in a fresh instance.
pub trait Call: Send + 'static {
    type Output: Send + 'static;

    /// Whether it may run in an instance kept from an earlier call (`reuse`): requests only.
    const REUSES: bool = false;

    /// The export it calls, as the contract names it (span names say it).
    fn export(&self) -> &'static str;

    /// Sets up the store before the instance exists (the job or agent run it serves).
    fn prepare(&self, _state: &mut HostState) {}

    /// Its input as a recording keeps it; `None` for a call never recorded (`describe`, tool
    /// listings: the host's own questions, no outside event's; a hook the component lacks).
    fn recorded(&self, _exports: &Exports) -> Option<Value> {
        None
    }

    /// Whether the component answered a failure (a recording under `errors` is kept).
    fn failed(_output: &Self::Output) -> bool {
        false
    }

    /// Its output as a recording keeps it.
    fn written(_output: &Self::Output) -> Value {
        Value::Null
    }

    fn call<'a>(
        self,
        store: &'a mut Store<HostState>,
        instance: &'a Instance,
        exports: &'a Exports,
    ) -> impl Future<Output = wasmtime::Result<Self::Output>> + Send + 'a;
}

/// What `describe` says, whatever version it came in.
#[derive(Debug, Clone)]
pub(crate) struct Description {
    pub name: String,
    pub version: String,
    /// (method, path)
    pub routes: Vec<(String, String)>,
    pub required_secrets: Vec<String>,
    pub metadata: Vec<(String, String)>,
    /// A 0.1 component's list of requested capabilities.
    pub listed: Option<Listed>,
}

impl Description {
    /// A `wasi:http` component's, which has no `describe`: no version of its own, and a note
    /// of its world.
    pub(crate) fn proxy() -> Self {
        Self {
            name: String::new(),
            version: String::new(),
            routes: Vec::new(),
            required_secrets: Vec::new(),
            metadata: vec![("world".into(), "wasi:http/proxy".into())],
            listed: None,
        }
    }
}

pub(crate) struct Describe;

impl Call for Describe {
    type Output = Description;

    fn export(&self) -> &'static str {
        "describe"
    }

    async fn call(
        self,
        store: &mut Store<HostState>,
        instance: &Instance,
        exports: &Exports,
    ) -> wasmtime::Result<Description> {
        Ok(match exports {
            Exports::V0_1 { handler, .. } => {
                let d = handler
                    .load(&mut *store, instance)?
                    .call_describe(&mut *store)
                    .await?;
                let capabilities = d.capabilities;
                Description {
                    name: d.name,
                    version: d.version,
                    routes: d.routes.into_iter().map(|r| (r.method, r.path)).collect(),
                    required_secrets: capabilities
                        .secrets
                        .iter()
                        .filter(|s| s.required)
                        .map(|s| s.name.clone())
                        .collect(),
                    metadata: d.metadata,
                    listed: Some(Listed {
                        secrets: capabilities.secrets.into_iter().map(|s| s.name).collect(),
                        outbound_hosts: capabilities.outbound_hosts,
                        agent: capabilities.agent,
                        tools: capabilities.tools,
                        kv: capabilities.kv,
                        jobs: capabilities.jobs,
                    }),
                }
            }
            Exports::V0_2 { handler, .. } => {
                let d = handler
                    .load(&mut *store, instance)?
                    .call_describe(&mut *store)
                    .await?;
                Description {
                    name: d.name,
                    version: d.version,
                    routes: d.routes.into_iter().map(|r| (r.method, r.path)).collect(),
                    required_secrets: d.required_secrets,
                    metadata: d.metadata,
                    listed: None,
                }
            }
            Exports::Proxy { .. } => {
                return Err(wasmtime::Error::msg(
                    "a wasi:http component has no describe",
                ));
            }
        })
    }
}

pub(crate) struct HandleHttp(pub HttpRequest);

impl Call for HandleHttp {
    type Output = service_contract::HttpResponse;

    const REUSES: bool = true;

    fn export(&self) -> &'static str {
        "handle-http"
    }

    fn recorded(&self, _exports: &Exports) -> Option<Value> {
        let r = &self.0;
        Some(json!({
            "method": r.method, "path": r.path, "query": r.query, "headers": r.headers,
            "body": written_bytes(&r.body),
        }))
    }

    fn failed(output: &Self::Output) -> bool {
        output.status >= 500
    }

    fn written(output: &Self::Output) -> Value {
        json!({"status": output.status, "headers": output.headers, "body": written_bytes(&output.body)})
    }

    async fn call(
        self,
        store: &mut Store<HostState>,
        instance: &Instance,
        exports: &Exports,
    ) -> wasmtime::Result<Self::Output> {
        if let Exports::Proxy { handler } = exports {
            return proxy::handle(store, instance, handler, self.0).await;
        }
        let HttpRequest {
            method,
            path,
            query,
            headers,
            body,
        } = self.0;
        let (status, headers, body) = match exports {
            Exports::V0_1 { handler, .. } => {
                let request = v0_1::service::adapter::types::HttpRequest {
                    method,
                    path,
                    query,
                    headers,
                    body,
                };
                let r = handler
                    .load(&mut *store, instance)?
                    .call_handle_http(&mut *store, &request)
                    .await?;
                (r.status, r.headers, r.body)
            }
            Exports::V0_2 { handler, .. } => {
                let request = v0_2::service::adapter::types::HttpRequest {
                    method,
                    path,
                    query,
                    headers,
                    body,
                };
                let r = handler
                    .load(&mut *store, instance)?
                    .call_handle_http(&mut *store, &request)
                    .await?;
                (r.status, r.headers, r.body)
            }
            Exports::Proxy { .. } => unreachable!("served above"),
        };
        Ok(service_contract::HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// How a job ended when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    pub message: String,
    /// Run it again after this many milliseconds.
    pub retry_after_ms: Option<u64>,
}

pub(crate) struct RunJob {
    pub job: JobContext,
    pub payload: Vec<u8>,
}

impl Call for RunJob {
    type Output = Result<(), JobFailure>;

    fn export(&self) -> &'static str {
        "run-job"
    }

    fn prepare(&self, state: &mut HostState) {
        state.job = Some(self.job.clone());
    }

    fn recorded(&self, _exports: &Exports) -> Option<Value> {
        Some(json!({
            "id": self.job.task_id, "attempt": self.job.attempt,
            "payload": written_bytes(&self.payload),
        }))
    }

    fn failed(output: &Self::Output) -> bool {
        output.is_err()
    }

    fn written(output: &Self::Output) -> Value {
        match output {
            Ok(()) => json!({"ok": null}),
            Err(f) => json!({"error": {"message": f.message, "retry_after_ms": f.retry_after_ms}}),
        }
    }

    async fn call(
        self,
        store: &mut Store<HostState>,
        instance: &Instance,
        exports: &Exports,
    ) -> wasmtime::Result<Self::Output> {
        Ok(match exports {
            Exports::V0_1 { handler, .. } => handler
                .load(&mut *store, instance)?
                .call_run_job(&mut *store, &self.payload)
                .await?
                .map_err(|message| JobFailure {
                    message,
                    retry_after_ms: None,
                }),
            Exports::V0_2 { handler, .. } => {
                use v0_2::exports::service::adapter::handler::Job;
                let job = Job {
                    id: self.job.task_id,
                    payload: self.payload,
                    attempt: self.job.attempt,
                };
                handler
                    .load(&mut *store, instance)?
                    .call_run_job(&mut *store, &job)
                    .await?
                    .map_err(|f| JobFailure {
                        message: f.message,
                        retry_after_ms: f.retry_after_ms,
                    })
            }
            Exports::Proxy { .. } => Err(JobFailure {
                message: "a wasi:http component runs no jobs (it exports no run-job)".into(),
                retry_after_ms: None,
            }),
        })
    }
}

/// `start` (true) or `stop` (false); `Ok` for a component without them.
pub(super) struct Hook(pub bool);

impl Call for Hook {
    type Output = Result<(), String>;

    fn export(&self) -> &'static str {
        if self.0 { "start" } else { "stop" }
    }

    fn recorded(&self, exports: &Exports) -> Option<Value> {
        exports.has_lifecycle().then_some(Value::Null)
    }

    fn failed(output: &Self::Output) -> bool {
        output.is_err()
    }

    fn written(output: &Self::Output) -> Value {
        either(output.as_ref().map(|()| Value::Null))
    }

    async fn call(
        self,
        store: &mut Store<HostState>,
        instance: &Instance,
        exports: &Exports,
    ) -> wasmtime::Result<Self::Output> {
        let start = self.0;
        match exports {
            Exports::V0_1 {
                lifecycle: Some(lifecycle),
                ..
            } => {
                let guest = lifecycle.load(&mut *store, instance)?;
                match start {
                    true => guest.call_start(&mut *store).await,
                    false => guest.call_stop(&mut *store).await,
                }
            }
            Exports::V0_2 {
                lifecycle: Some(lifecycle),
                ..
            } => {
                let guest = lifecycle.load(&mut *store, instance)?;
                match start {
                    true => guest.call_start(&mut *store).await,
                    false => guest.call_stop(&mut *store).await,
                }
            }
            _ => Ok(Ok(())),
        }
    }
}

/// A `result<_, string>` as a recording keeps it.
fn either(result: Result<Value, &String>) -> Value {
    match result {
        Ok(value) => json!({"ok": value}),
        Err(message) => json!({"error": message}),
    }
}

/// A tool a component offers, as it describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferedTool {
    pub name: String,
    pub description: String,
    pub parameters_json: String,
}

pub(crate) struct ListTools;

impl Call for ListTools {
    type Output = Vec<OfferedTool>;

    fn export(&self) -> &'static str {
        "list-tools"
    }

    async fn call(
        self,
        store: &mut Store<HostState>,
        instance: &Instance,
        exports: &Exports,
    ) -> wasmtime::Result<Self::Output> {
        macro_rules! offered {
            ($specs:expr) => {
                $specs
                    .into_iter()
                    .map(|t| OfferedTool {
                        name: t.name,
                        description: t.description,
                        parameters_json: t.parameters_json,
                    })
                    .collect()
            };
        }
        Ok(match exports {
            Exports::V0_1 {
                tools: Some(tools), ..
            } => offered!(
                tools
                    .load(&mut *store, instance)?
                    .call_list_tools(&mut *store)
                    .await?
            ),
            Exports::V0_2 {
                tools: Some(tools), ..
            } => offered!(
                tools
                    .load(&mut *store, instance)?
                    .call_list_tools(&mut *store)
                    .await?
            ),
            _ => Vec::new(),
        })
    }
}

pub(crate) struct CallTool {
    pub name: String,
    pub args_json: String,
    /// The agent run that called the tool.
    pub run: Option<RunContext>,
}

impl Call for CallTool {
    type Output = Result<String, String>;

    fn export(&self) -> &'static str {
        "call-tool"
    }

    fn prepare(&self, state: &mut HostState) {
        state.run = self.run.clone();
    }

    fn recorded(&self, _exports: &Exports) -> Option<Value> {
        Some(json!({"name": self.name, "args_json": self.args_json}))
    }

    fn failed(output: &Self::Output) -> bool {
        output.is_err()
    }

    fn written(output: &Self::Output) -> Value {
        either(output.as_ref().map(|text| json!(text)))
    }

    async fn call(
        self,
        store: &mut Store<HostState>,
        instance: &Instance,
        exports: &Exports,
    ) -> wasmtime::Result<Self::Output> {
        let (name, args) = (&self.name, &self.args_json);
        match exports {
            Exports::V0_1 {
                tools: Some(tools), ..
            } => {
                tools
                    .load(&mut *store, instance)?
                    .call_call_tool(&mut *store, name, args)
                    .await
            }
            Exports::V0_2 {
                tools: Some(tools), ..
            } => {
                tools
                    .load(&mut *store, instance)?
                    .call_call_tool(&mut *store, name, args)
                    .await
            }
            _ => Ok(Err("this adapter offers no tools".into())),
        }
    }
}
