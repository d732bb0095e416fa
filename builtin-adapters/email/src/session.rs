//! Start and stop: one polling task at a time, which `stop` ends within a short grace.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use service_contract::AdapterContext;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::config::Config;
use crate::outbox::Outbox;
use crate::worker::Worker;

/// Within the host's stop deadline, so `stop` always finishes promptly. A poll that has not
/// ended by then is aborted.
const STOP_GRACE: Duration = Duration::from_secs(3);

#[derive(Default)]
pub struct Session {
    running: Mutex<Option<Running>>,
}

struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Session {
    /// Reads the settings and starts polling on a task of its own. A problem with the settings
    /// goes on the registry entry and the adapter stays offline.
    pub fn launch(&self, ctx: &Arc<AdapterContext>) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.as_ref().is_some_and(|r| !r.task.is_finished()) {
            return;
        }
        let config = match Config::from_secrets(|name| ctx.secrets.get(name)) {
            Ok(config) => config,
            Err(problem) => {
                tracing::warn!(adapter = NAME, "not started: {problem}");
                ctx.registry.report_config(NAME, &problem);
                return;
            }
        };
        let outbox = match Outbox::new(&config) {
            Ok(outbox) => outbox,
            Err(failure) => {
                tracing::warn!(adapter = NAME, "{failure}");
                ctx.registry
                    .mark_error(NAME, failure.kind.name(), &failure.message);
                return;
            }
        };
        let stop = CancellationToken::new();
        let worker = Worker::new(Arc::clone(ctx), config, outbox, stop.clone());
        let task = tokio::spawn(worker.run());
        *running = Some(Running { stop, task });
    }

    /// Stops polling and cancels the agent run in flight.
    pub async fn shutdown(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Running { stop, mut task }) = running {
            stop.cancel();
            if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
                task.abort();
            }
        }
    }
}
