//! `agent`: runs agents for adapters granted `agent`. The run is cancelled when the calling
//! request or job is abandoned, and its trace records that.

use service_contract::agent::{ProfileChoice, RunFailureKind, RunRequest};

use super::super::bindings::service::adapter::agent::{
    FailureKind, Host, RunError, RunReply, RunRequest as WitRequest,
};
use super::super::state::HostState;
use crate::agents::profiles::DEFAULT_PROFILE;

impl Host for HostState {
    async fn run(&mut self, request: WitRequest) -> wasmtime::Result<Result<RunReply, RunError>> {
        let caller = self.caller.clone();
        if !caller.effective.agent {
            caller.deny("agent.run without the agent grant");
            return Ok(Err(RunError {
                kind: FailureKind::Denied,
                message: "this adapter was not granted `agent`".into(),
                trace_id: None,
            }));
        }
        let name = request
            .profile
            .unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
        let run = RunRequest {
            prompt: request.prompt,
            profile: if request.profile_required {
                ProfileChoice::Required(name)
            } else {
                ProfileChoice::Preferred(name)
            },
            model: None,
            source: caller.adapter.clone(),
            parent: None,
        };
        let cancel = self.cancel.child_token();
        let result = caller.services.agents.run(run, cancel).await;
        Ok(result
            .map(|reply| RunReply {
                text: reply.text,
                trace_id: reply.trace_id,
            })
            .map_err(|failure| RunError {
                kind: match failure.kind {
                    RunFailureKind::Invalid => FailureKind::Invalid,
                    RunFailureKind::UnknownAgent => FailureKind::UnknownAgent,
                    RunFailureKind::NotConfigured => FailureKind::NotConfigured,
                    RunFailureKind::Failed => FailureKind::Failed,
                    RunFailureKind::Cancelled => FailureKind::Cancelled,
                },
                message: failure.message,
                trace_id: failure.trace_id,
            }))
    }
}
