//! The job worker: runs enqueued adapter jobs in fresh instances with bounded concurrency.
//! Each job is a task (pending → running → completed/error); deleting the task cancels it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::WasmHost;
use crate::db::Db;
use crate::jobs::{self, Job};
use crate::tasks::{self, RunningTasks, TaskStatus};

/// Jobs that may run at once.
const CONCURRENCY: usize = 4;
/// Pending jobs are looked for at least this often (an enqueue wakes the worker at once).
const POLL: Duration = Duration::from_secs(1);

pub struct Worker {
    pub host: Arc<WasmHost>,
    pub db: Db,
    pub running: Arc<RunningTasks>,
    pub ready: Arc<Notify>,
}

impl Worker {
    pub async fn run(self, stop: CancellationToken) {
        let slots = Arc::new(Semaphore::new(CONCURRENCY));
        loop {
            // With every slot busy the queue is not read (a burst of enqueues would read it
            // once each for nothing); a finishing job frees a slot and the loop goes on.
            let free = match slots.available_permits() {
                0 => {
                    tokio::select! {
                        permit = Arc::clone(&slots).acquire_owned() => drop(permit),
                        () = stop.cancelled() => return,
                    }
                    continue;
                }
                free => free as u32,
            };
            let claimed = self
                .db
                .call(move |conn| {
                    let batch = jobs::pending(conn, free)?;
                    for job in &batch {
                        tasks::set_status(conn, &job.task_id, TaskStatus::Running)?;
                    }
                    Ok(batch)
                })
                .await;
            match claimed {
                Ok(batch) => {
                    for job in batch {
                        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                            return;
                        };
                        let (host, db, running) = (
                            Arc::clone(&self.host),
                            self.db.clone(),
                            Arc::clone(&self.running),
                        );
                        tokio::spawn(async move {
                            run_one(&host, &db, &running, job).await;
                            drop(permit);
                        });
                    }
                }
                Err(e) => tracing::error!("cannot read the job queue: {e}"),
            }
            tokio::select! {
                () = self.ready.notified() => {}
                () = tokio::time::sleep(POLL) => {}
                () = stop.cancelled() => return,
            }
        }
    }
}

async fn run_one(host: &WasmHost, db: &Db, running: &RunningTasks, job: Job) {
    let cancel = running.register(&job.task_id);
    // A delete between the claim and the registration found no token to cancel; it did
    // leave the task `cancelled`, which is checked once the token is in place.
    let task_id = job.task_id.clone();
    let still_wanted = db
        .call(move |conn| Ok(tasks::get(conn, &task_id)?.is_some_and(|t| t.status.is_active())))
        .await;
    if matches!(still_wanted, Ok(false)) {
        running.finish(&job.task_id);
        return;
    }
    let result = tokio::select! {
        result = host.run_job(&job.adapter, &job.task_id, job.payload) => result,
        () = cancel.cancelled() => Err("cancelled".to_owned()),
    };
    running.finish(&job.task_id);
    let task_id = job.task_id;
    let recorded = db
        .call(move |conn| match result {
            Ok(()) => tasks::set_status(conn, &task_id, TaskStatus::Completed).map(drop),
            Err(message) => {
                tasks::set_status(conn, &task_id, TaskStatus::Error)?;
                tasks::append_note(conn, &task_id, &format!("failed: {message}"))
            }
        })
        .await;
    if let Err(e) = recorded {
        tracing::error!("cannot record a job's outcome: {e}");
    }
}
