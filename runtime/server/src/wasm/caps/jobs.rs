//! `jobs`: persists deferred work; the job worker runs it later in a fresh instance.

use super::super::bindings::service::adapter::jobs::Host;
use super::super::state::HostState;
use crate::jobs;

impl Host for HostState {
    async fn enqueue(&mut self, payload: Vec<u8>) -> wasmtime::Result<Result<String, String>> {
        let caller = self.caller.clone();
        if !caller.effective.jobs {
            caller.deny("jobs.enqueue without the jobs grant");
            return Ok(Err("jobs are not granted".into()));
        }
        let adapter = caller.adapter.clone();
        // Written before the handler's response leaves, so an accepted job survives a crash.
        let queued = caller
            .services
            .db
            .call(move |conn| jobs::enqueue(conn, &adapter, &payload))
            .await;
        Ok(match queued {
            Ok(task_id) => {
                caller.services.jobs_ready.notify_one();
                Ok(task_id)
            }
            Err(e) => Err(e.to_string()),
        })
    }
}
