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
            let free = slots.available_permits() as u32;
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
