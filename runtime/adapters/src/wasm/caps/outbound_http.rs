//! `outbound-http`: requests to granted origins, through the contract's interface or the
//! standard `wasi:http/outgoing-handler` (both under `wasm::outbound`'s policy).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use tokio::sync::Semaphore;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{RequestOptions, WasiBody};

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Origin, Request};
use super::super::guest_lane;
use super::super::outbound::{self, Failure, Outbound};
use super::super::recording::{Answer, Tape};
use super::super::state::{Caller, HostState};
use super::{Capability, denied, link_versions, on_host, secrets};
use latest::service::adapter::outbound_http::{Request as Outgoing, Response};
use latest::service::adapter::types::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Origins such as `https://slack.com` or `http://127.0.0.1:9000`.
    #[serde(default)]
    outbound_hosts: Vec<String>,
    /// Origins of URLs held in environment variables (an adapter whose API base is
    /// configurable): variable name → the URL used when it is unset; an empty one grants
    /// nothing while the variable is unset (a server only the operator can name).
    #[serde(default)]
    outbound_env: BTreeMap<String, String>,
    #[serde(default)]
    limits: Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Standard `wasi:http` requests one call may have in flight at once (the contract's
    /// `send` waits for each, so it has one at most).
    pub http_requests_at_once: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            http_requests_at_once: 8,
        }
    }
}

impl Grant {
    /// The origin `[outbound_env]` grants through `variable`: `None` while an empty default
    /// stands; an error when the variable is not listed there or is not a URL.
    pub(crate) fn env_origin(
        &self,
        variable: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Origin>, String> {
        let default = self
            .outbound_env
            .get(variable)
            .ok_or_else(|| format!("{variable} is not an [outbound_env] variable of this grant"))?;
        let value = env(variable)
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| default.clone());
        if value.is_empty() {
            return Ok(None);
        }
        let url = reqwest::Url::parse(&value)
            .map_err(|e| format!("{variable} is not a URL ({value:?}): {e}"))?;
        Origin::of(&url)
            .map(Some)
            .ok_or_else(|| format!("{variable} has no host"))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    pub origins: BTreeSet<Origin>,
    pub limits: Limits,
    /// The `[outbound_env]` variables its origins come from (writing one reloads it).
    pub variables: BTreeSet<String>,
}

pub struct OutboundHttp;

impl Capability for OutboundHttp {
    const INTERFACE: &'static str = "outbound-http";
    const STANDARD: &'static [&'static str] = &["wasi:http/outgoing-handler"];
    const KEYS: &'static [&'static str] = &["outbound_hosts", "outbound_env"];
    const LIMIT_KEYS: &'static [LimitKey] = &[LimitKey {
        name: "http_requests_at_once",
        max: 64,
    }];
    type Grant = Grant;
    type Granted = Granted;
    type State = Outbound;

    fn grant(
        request: &Request,
        grant: &Grant,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Granted, String> {
        let mut granted = Origin::parse_all(&grant.outbound_hosts)?;
        for variable in grant.outbound_env.keys() {
            granted.extend(grant.env_origin(variable, env)?);
        }
        let limits = grant.limits;
        let variables = grant.outbound_env.keys().cloned().collect();
        if !request.imports.contains(Self::INTERFACE) {
            return Ok(Granted {
                limits,
                variables,
                ..Granted::default()
            });
        }
        // A 0.1 component lists its origins, or `*` to leave them to the operator.
        let origins = match &request.listed {
            Some(listed) if !listed.outbound_hosts.iter().any(|o| o == "*") => {
                Origin::parse_all(&listed.outbound_hosts)?
                    .into_iter()
                    .filter(|o| granted.contains(o))
                    .collect()
            }
            _ => granted,
        };
        Ok(Granted {
            origins,
            limits,
            variables,
        })
    }

    fn granted_anything(granted: &Granted) -> bool {
        !granted.origins.is_empty()
    }

    fn summary(granted: &Granted) -> Vec<String> {
        granted
            .origins
            .iter()
            .map(|o| format!("origin:{o}"))
            .collect()
    }

    /// Its client, which sends under the policy of `wasm::outbound`.
    fn state(granted: &Granted) -> anyhow::Result<Outbound> {
        Outbound::new(&granted.origins)
    }

    fn suggest(request: &Request) -> Vec<String> {
        let listed = request.listed.as_ref().map(|l| l.outbound_hosts.clone());
        let hosts = listed
            .filter(|h| !h.is_empty() && !h.iter().any(|h| h == "*"))
            .unwrap_or_else(|| vec!["https://api.example.com".into()]);
        vec![format!("outbound_hosts = {hosts:?}")]
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, outbound_http)
    }
}

impl latest::service::adapter::outbound_http::Host for HostState {
    async fn send(&mut self, request: Outgoing) -> wasmtime::Result<Result<Response, Error>> {
        self.heavy(request.body.len()).await;
        let caller = self.caller.clone();
        let request = outbound::Request {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout_ms: request.timeout_ms,
            follow_redirects: true,
        };
        let args = self.args(|| serde_json::to_value(&request).unwrap_or_default());
        if let Some(answer) = self.replayed("outbound-http.send", &args)? {
            return Ok(answer);
        }
        let sent = on_host(self, async move { send(&caller, request).await }).await;
        let answer = match sent {
            Ok(response) => Ok(Response {
                status: response.status,
                headers: response.headers,
                body: response.body,
            }),
            Err(Failure::Denied(message)) => Err(denied(self, message)),
            Err(Failure::Invalid(message)) => Err(Error::Invalid(message)),
            Err(Failure::Failed(message)) => Err(Error::Failed(message)),
        };
        self.taped("outbound-http.send", args, &answer);
        Ok(answer)
    }
}

impl v0_1::service::adapter::outbound_http::Host for HostState {
    async fn send(
        &mut self,
        request: v0_1::service::adapter::outbound_http::Request,
    ) -> wasmtime::Result<Result<v0_1::service::adapter::outbound_http::Response, String>> {
        let request = Outgoing {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout_ms: request.timeout_ms,
        };
        let sent = latest::service::adapter::outbound_http::Host::send(self, request).await?;
        Ok(sent
            .map(|r| v0_1::service::adapter::outbound_http::Response {
                status: r.status,
                headers: r.headers,
                body: r.body,
            })
            .map_err(|e| super::trap(e).to_string()))
    }
}

/// Sends a request of `caller`'s under its grant, filling placeholders as `secrets` allows.
async fn send(caller: &Caller, request: outbound::Request) -> Result<outbound::Response, Failure> {
    let origins = &caller.granted.outbound_http.origins;
    let secret = |name: &str, origin: &Origin| secrets::for_placeholder(caller, name, origin);
    caller
        .states
        .outbound_http
        .send(origins, secret, request)
        .await
}

/// The `wasi:http/outgoing-handler` side: `wasmtime-wasi-http` hands each request a guest
/// sends to these hooks, which send it under the same grant and policy as `outbound-http`.
/// Redirects come back to the guest (as `wasi:http` specifies); its next request is checked.
pub(crate) struct WasiHttpHooks {
    caller: Arc<Caller>,
    /// The requests this call has in flight (`limits.http_requests_at_once`).
    in_flight: Arc<Semaphore>,
    tape: Option<Tape>,
}

type Sent = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
)>;

impl WasiHttpHooks {
    pub(crate) fn new(caller: Arc<Caller>, tape: Option<Tape>) -> Self {
        let most = caller.granted.outbound_http.limits.http_requests_at_once;
        Self {
            caller,
            in_flight: Arc::new(Semaphore::new(most as usize)),
            tape,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpHooks for WasiHttpHooks {
    /// reqwest sets `host` from the URL the policy checked.
    fn set_host_header(&mut self) -> bool {
        false
    }

    /// A guest writing a body (a response, a request) goes on without waiting for the host to
    /// take each chunk, up to 16 chunks of 64 KiB: 1 MiB held per body at most.
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        16
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        64 << 10
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            let most = self
                .caller
                .granted
                .outbound_http
                .limits
                .http_requests_at_once;
            self.caller.over_quota(&format!(
                "a wasi:http request while {most} of the call's were in flight \
                 (limits.http_requests_at_once)"
            ));
            return Box::new(async { Err(wasmtime_wasi_http::Error::ConnectionLimitReached) });
        };
        let caller = Arc::clone(&self.caller);
        let host = caller.services.host.clone();
        let tape = self.tape.clone();
        Box::new(async move {
            let sent = guest_lane::on_host(&host, send_wasi(caller, request, options, tape)).await;
            drop(permit);
            sent
        })
    }
}

async fn send_wasi(
    caller: Arc<Caller>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    tape: Option<Tape>,
) -> Sent {
    use wasmtime_wasi_http::Error as Code;
    let (parts, body) = request.into_parts();
    let body = http_body_util::Limited::new(body, outbound::MAX_REQUEST)
        .collect()
        .await
        .map_err(|e| match e.downcast::<Code>() {
            Ok(code) => *code,
            Err(_) => Code::HttpRequestBodySize(None),
        })?
        .to_bytes();
    let timeout = options
        .and_then(|o| o.first_byte_timeout.or(o.connect_timeout))
        .map(|t| t.min(outbound::MAX_TIMEOUT))
        .map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX));
    let request = outbound::Request {
        method: parts.method.to_string(),
        url: parts.uri.to_string(),
        headers: parts
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
            .collect(),
        body: body.to_vec(),
        timeout_ms: timeout,
        follow_redirects: false,
    };
    let args = tape
        .as_ref()
        .map(|_| serde_json::to_value(&request).unwrap_or_default());
    let sent = match (&tape, &args) {
        // A replay: the recorded answer, a refusal (a shadow's), or the call ends where it
        // diverged.
        (Some(tape), Some(args)) if let Some(answer) = tape.answer("wasi:http.send", args) => {
            match answer {
                Answer::Recorded(value) => serde_json::from_value(value)
                    .map_err(|e| Code::InternalError(Some(e.to_string())))?,
                Answer::Refused(_) => return Err(Code::HttpRequestDenied),
                Answer::Ended(why) => return Err(Code::InternalError(Some(why))),
            }
        }
        _ => {
            let sent = send(&caller, request).await;
            if let (Some(tape), Some(args)) = (tape, args) {
                tape.note("wasi:http.send", || args, &sent);
            }
            sent
        }
    };
    match sent {
        Ok(response) => {
            let mut answer = http::Response::builder().status(response.status);
            for (name, value) in response.headers {
                answer = answer.header(name, value);
            }
            let body = Full::new(Bytes::from(response.body))
                .map_err(|never| match never {})
                .boxed_unsync();
            let answer = answer
                .body(body)
                .map_err(|e| Code::InternalError(Some(e.to_string())))?;
            Ok((answer, Box::new(async { Ok(()) })))
        }
        Err(Failure::Denied(message)) => {
            caller.deny(&message);
            Err(Code::HttpRequestDenied)
        }
        Err(Failure::Invalid(message) | Failure::Failed(message)) => {
            Err(Code::InternalError(Some(message)))
        }
    }
}
