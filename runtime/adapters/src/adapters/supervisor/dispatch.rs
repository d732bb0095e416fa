//! Requests to `/api/adapters/<name>/...`: refused while an adapter is not serving, answered
//! by it otherwise, its failures on its entry.

use futures_util::future::BoxFuture;
use service_contract::{AdapterError, AdapterStatus, FailureKind, HttpRequest, HttpResponse};

use super::{Supervisor, read};
use crate::adapters::managed::{CallError, Managed};
use crate::adapters::response;

/// Why a request was not answered by its adapter: the status and what the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Refusal {
    pub(super) fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl Supervisor {
    /// After an answer that went well (below 500, nothing recorded while it was made), an
    /// adapter whose entry says `error` from an earlier failure is `running` again: one slow
    /// request is a count on its entry, not an adapter stuck in `error`. A configuration
    /// problem it still has keeps it in `error`.
    fn recovered(
        &self,
        name: &str,
        runner: &dyn Managed,
        answer: &HttpResponse,
        errors_before: u64,
    ) {
        let in_error = self
            .registry()
            .get(name)
            .is_some_and(|e| e.status == AdapterStatus::Error);
        if in_error
            && answer.status < 500
            && self.errors(name) == errors_before
            && runner.config_problem().is_none()
        {
            self.registry().mark_running(name);
        }
    }

    /// Answers a request to `/api/adapters/<name>/...`.
    pub fn dispatch<'a>(
        &'a self,
        name: &'a str,
        request: HttpRequest,
    ) -> BoxFuture<'a, Result<HttpResponse, Refusal>> {
        Box::pin(async move {
            let slot = read(&self.slots)
                .get(name)
                .map(|s| (s.runner.clone(), s.vacancy.clone()));
            let (runner, vacancy) =
                slot.ok_or_else(|| Refusal::new(404, format!("no adapter named {name:?}")))?;
            let Some(runner) = runner else {
                let refusal =
                    vacancy.unwrap_or_else(|| format!("the {name} adapter is not serving"));
                return Err(Refusal::new(503, refusal));
            };
            if let Some(reason) = self.off(name) {
                return Err(Refusal::new(
                    503,
                    format!("adapter {name:?} is off: {reason}"),
                ));
            }
            let errors_before = self.errors(name);
            let failure = match runner.handle_http(request).await {
                Ok(answer) => match response::check(&answer) {
                    Ok(()) => {
                        // Activity is what it handled, not what it turned away.
                        if answer.status < 400 {
                            self.registry().touch(name);
                        }
                        self.recovered(name, runner.as_ref(), &answer, errors_before);
                        return Ok(answer);
                    }
                    Err(problem) => AdapterError::new(FailureKind::BadResponse, problem),
                },
                Err(CallError::Busy(message)) => return Err(Refusal::new(503, message)),
                Err(CallError::Failed(failure)) => failure,
            };
            self.registry()
                .mark_error(name, &failure.kind, &failure.message);
            let status = if failure.is(FailureKind::Timeout) {
                503
            } else if failure.is(FailureKind::BadResponse) {
                502
            } else {
                500
            };
            Err(Refusal::new(
                status,
                format!(
                    "adapter {name:?} failed ({}); its entry in /api/adapters has the details",
                    failure.kind
                ),
            ))
        })
    }
}
