//! `outbound-http`: requests to granted origins (see `wasm::outbound` for the policy).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use wasmtime::component::Linker;

use super::super::bindings::{v0_1, v0_2};
use super::super::grants::{LimitKey, Origin, Request};
use super::super::outbound::{self, Failure};
use super::super::state::HostState;
use super::{Capability, denied, link_versions, on_host};
use v0_2::service::adapter::outbound_http::{Request as Outgoing, Response};
use v0_2::service::adapter::types::Error;

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
}

impl Grant {
    /// The origin `[outbound_env]` grants through `variable`: `None` while an empty default
    /// stands; an error when the variable is not listed there or is not a URL.
    pub fn env_origin(
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
}

pub struct OutboundHttp;

impl Capability for OutboundHttp {
    const INTERFACE: &'static str = "outbound-http";
    const KEYS: &'static [&'static str] = &["outbound_hosts", "outbound_env"];
    const LIMIT_KEYS: &'static [LimitKey] = &[];
    type Grant = Grant;
    type Granted = Granted;
    type State = ();

    fn grant(
        request: &Request,
        grant: &Grant,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Granted, String> {
        let mut granted = Origin::parse_all(&grant.outbound_hosts)?;
        for variable in grant.outbound_env.keys() {
            granted.extend(grant.env_origin(variable, env)?);
        }
        if !request.imports.contains(Self::INTERFACE) {
            return Ok(Granted::default());
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
        Ok(Granted { origins })
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

    fn state(_: &Granted) {}

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

impl v0_2::service::adapter::outbound_http::Host for HostState {
    async fn send(&mut self, request: Outgoing) -> wasmtime::Result<Result<Response, Error>> {
        self.heavy(request.body.len()).await;
        let caller = self.caller.clone();
        let request = outbound::Request {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout_ms: request.timeout_ms,
        };
        let sent = on_host(self, async move {
            let origins = &caller.granted.outbound_http.origins;
            let secret = |name: &str, origin: &Origin| caller.secret_for(name, origin);
            caller.outbound.send(origins, secret, request).await
        })
        .await;
        Ok(match sent {
            Ok(response) => Ok(Response {
                status: response.status,
                headers: response.headers,
                body: response.body,
            }),
            Err(Failure::Denied(message)) => Err(denied(self, message)),
            Err(Failure::Invalid(message)) => Err(Error::Invalid(message)),
            Err(Failure::Failed(message)) => Err(Error::Failed(message)),
        })
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
        let sent = v0_2::service::adapter::outbound_http::Host::send(self, request).await?;
        Ok(sent
            .map(|r| v0_1::service::adapter::outbound_http::Response {
                status: r.status,
                headers: r.headers,
                body: r.body,
            })
            .map_err(|e| super::trap(e).to_string()))
    }
}
