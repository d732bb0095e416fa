//! The engine as the contract's [`AgentRunner`]: what adapters, the scheduler and delegating
//! tools run agents through.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::agent::{AgentRunner, RunFailure, RunFailureKind, RunReply, RunRequest};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Engine, RunError};

/// Adapters, the scheduler and delegating tools run agents through this. The caller's token
/// cancels the run; dropping the returned future does not abandon it half-recorded.
impl AgentRunner for Engine {
    fn run(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<RunReply, RunFailure>> {
        let this = self.this.upgrade();
        async move {
            let engine = this.ok_or_else(|| RunFailure {
                kind: RunFailureKind::Failed,
                message: "the engine is shutting down".into(),
                trace_id: None,
                waiting: None,
            })?;
            // On a task of its own: a caller that gives up (a component call that timed out)
            // cancels the token, and the run still records how it ended in its trace.
            let run = tokio::spawn(
                async move {
                    match request.conversation.clone() {
                        Some(key) => engine.run_keyed(request, key, &cancel).await,
                        None => engine.run(request, None, &cancel).await,
                    }
                }
                .in_current_span(),
            );
            run.await
                .map_err(|e| RunFailure {
                    kind: RunFailureKind::Failed,
                    message: format!("the run task failed: {e}"),
                    trace_id: None,
                    waiting: None,
                })?
                .map(|output| RunReply {
                    trace_id: output.trace_id,
                    text: output.text,
                })
                .map_err(RunError::into_failure)
        }
        .boxed()
    }

    fn provider_name(&self) -> String {
        self.provider_choice().kind.as_str().to_owned()
    }
}
