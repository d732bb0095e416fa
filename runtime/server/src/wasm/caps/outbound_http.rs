//! `outbound-http`: requests to granted origins (see `wasm::outbound` for the policy).

use super::super::bindings::service::adapter::outbound_http::{Host, Request, Response};
use super::super::outbound::{self, Failure};
use super::super::state::HostState;

impl Host for HostState {
    async fn send(&mut self, request: Request) -> wasmtime::Result<Result<Response, String>> {
        let caller = self.caller.clone();
        let secret = |name: &str| {
            if !caller.effective.secrets.contains(name) {
                return Err(Failure::Denied(format!("secret {name} is not granted")));
            }
            caller
                .services
                .env
                .get(name)
                .ok_or_else(|| Failure::Failed(format!("{name} is not set")))
        };
        let request = outbound::Request {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout_ms: request.timeout_ms,
        };
        let result = caller
            .outbound
            .send(&caller.effective, secret, request)
            .await;
        Ok(match result {
            Ok(response) => Ok(Response {
                status: response.status,
                headers: response.headers,
                body: response.body,
            }),
            Err(Failure::Denied(message)) => {
                caller.deny(&message);
                Err(message)
            }
            Err(Failure::Failed(message)) => Err(message),
        })
    }
}
