//! The job worker: runs enqueued jobs in fresh instances, up to `[jobs] workers` at once,
//! taking the adapters with jobs in turn (round-robin), so one adapter's flood never holds
//! another's job back. It wakes when a job is enqueued, a job ends or a retry comes due; it
//! never polls. Each job is a task (pending → running → completed/error); deleting the task
//! cancels it. At shutdown it stops taking jobs and lets running ones finish within the grace
//! period; one cut off runs again at the next start (up to `[jobs] attempts` starts).
//!
//! With replicas, each worker claims from the shared queue under a lease it renews while its
//! jobs run; it also looks for jobs whose lease ran out (their replica died) and puts them
//! back in the queue, so they run elsewhere.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::components::Components;
use super::exports::JobFailure;
use super::generation::Generation;
use super::sandbox::AdapterPlace;
use super::state::JobContext;
use crate::adapters::Supervisor;
use crate::config::JobsSection;
use crate::db::Db;
use crate::db::now_ms;
use crate::error::{Error, Result};
use crate::job_queue::{self, Job, Lease, Outcome, Waiting};
use crate::task_runs;
use crate::tasks::RunningTasks;
use crate::telemetry::{TARGET, propagation};
use tracing::Instrument;

/// A job taken off the queue, with the generation that runs it and its instance place.
struct Claimed {
    job: Job,
    generation: Arc<Generation>,
    place: AdapterPlace,
}

/// The task ids of the jobs a worker holds (claimed, and not yet recorded as ended).
#[derive(Default, Clone)]
struct Held(Arc<Mutex<HashSet<String>>>);

impl Held {
    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where the worker is in its round of the adapters with jobs.
#[derive(Default)]
struct Turns {
    /// The adapter whose job was claimed last.
    last: Option<String>,
    /// Adapters that had a job ready when the queue was last read, in name order.
    ready: Vec<String>,
    read_at: Option<Instant>,
    /// Adapters whose backlog the registry shows.
    shown: HashSet<String>,
}

/// How long the adapters read as having jobs ready are tried before the queue is read again
/// (another adapter's first job waits at most this long behind a busy one's).
const LOOK_AGAIN: Duration = Duration::from_millis(250);

/// The longest wait a component may ask for before a retry.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

pub struct Worker {
    pub components: Arc<Components>,
    pub supervisor: Arc<Supervisor>,
    pub db: Db,
    pub running: Arc<RunningTasks>,
    pub ready: Arc<Notify>,
    pub settings: JobsSection,
    /// The replica this worker runs on: the holder of its jobs' leases.
    pub replica: String,
}

impl Worker {
    /// Runs jobs until `stop`, then drains (see the module's notes).
    pub fn run(self, stop: CancellationToken) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let this = Arc::new(self);
            let held = Held::default();
            let leases_stop = CancellationToken::new();
            let leases =
                tokio::spawn(Arc::clone(&this).keep_leases(held.clone(), leases_stop.clone()));
            let slots = Arc::new(Semaphore::new(this.settings.workers()));
            let mut in_flight = JoinSet::new();
            let mut turns = Turns::default();
            loop {
                while in_flight.try_join_next().is_some() {}
                let permit = tokio::select! {
                    permit = Arc::clone(&slots).acquire_owned() => permit.expect("never closed"),
                    () = stop.cancelled() => break,
                };
                match this.next(&mut turns).await {
                    Some(claimed) => {
                        let task_id = claimed.job.task_id.clone();
                        held.lock().insert(task_id.clone());
                        let (worker, held) = (Arc::clone(&this), held.clone());
                        in_flight.spawn(async move {
                            worker.run_one(claimed).await;
                            held.lock().remove(&task_id);
                            drop(permit);
                            // A slot is free, and a retry may have been scheduled.
                            worker.ready.notify_one();
                        });
                    }
                    None => {
                        drop(permit);
                        let wait = this.until_next_retry().await;
                        tokio::select! {
                            () = this.ready.notified() => {}
                            () = tokio::time::sleep(wait) => {}
                            () = stop.cancelled() => break,
                        }
                    }
                }
            }
            let grace = this.settings.grace();
            let drained = tokio::time::timeout(grace, async {
                while in_flight.join_next().await.is_some() {}
            })
            .await;
            if drained.is_err() {
                tracing::warn!(
                    jobs = in_flight.len(),
                    "jobs still running after the {grace:?} grace period; they run again at the next start"
                );
            }
            leases_stop.cancel();
            let _ = leases.await;
        })
    }

    fn lease(&self) -> Lease<'_> {
        Lease {
            holder: &self.replica,
            ms: self.settings.lease().as_millis() as i64,
        }
    }

    /// Renews the leases of the jobs this worker holds a quarter of the way through, and
    /// requeues jobs whose lease ran out, until `stop`. Only the jobs it holds: one leased to
    /// this replica that it does not hold (a claim whose answer was lost with the database
    /// connection) lets its lease run out and runs again, rather than stay `running` for good.
    async fn keep_leases(self: Arc<Self>, held: Held, stop: CancellationToken) {
        let every = self.settings.lease() / 4;
        let attempts = self.settings.attempts();
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => return,
            }
            let (holder, ms) = (self.replica.clone(), self.lease().ms);
            let jobs: Vec<String> = held.lock().iter().cloned().collect();
            let kept = self
                .db
                .call(move |conn| {
                    let lease = Lease {
                        holder: &holder,
                        ms,
                    };
                    job_queue::renew(conn, lease, &jobs)?;
                    job_queue::reclaim(conn, attempts, None)
                })
                .await;
            match kept {
                Ok((0, 0)) => {}
                Ok((requeued, failed)) => {
                    tracing::info!(
                        requeued,
                        failed,
                        "took over the jobs of a replica that stopped"
                    );
                    self.ready.notify_one();
                }
                Err(e) => tracing::warn!("cannot renew the leases of running jobs: {e}"),
            }
        }
    }

    /// The next job, from the first adapter after the last one served (in name order,
    /// wrapping) that has a job ready, serves, and has an instance free within its background
    /// share (the rest stays free for its requests; taken here, so a job never holds a worker
    /// while it waits for one). Which adapters have jobs ready is read again when none is
    /// left to try, after a call that took none, or once [`LOOK_AGAIN`] has passed; not
    /// before every claim, as that read counts the whole queue. Each read also brings the
    /// backlogs on the registry entries up to date.
    async fn next(&self, turns: &mut Turns) -> Option<Claimed> {
        let now = now_ms();
        if turns.ready.is_empty() || turns.read_at.is_none_or(|at| at.elapsed() >= LOOK_AGAIN) {
            let waiting = match self
                .db
                .call(move |conn| job_queue::waiting(conn, now))
                .await
            {
                Ok(waiting) => waiting,
                Err(e) => {
                    tracing::error!("cannot read the job queue: {e}");
                    return None;
                }
            };
            self.show_backlog(&waiting, &mut turns.shown);
            turns.ready = waiting
                .into_iter()
                .filter(|w| w.ready)
                .map(|w| w.adapter)
                .collect();
            turns.read_at = Some(Instant::now());
        }
        let after = |adapter: &String| turns.last.as_ref().is_none_or(|last| adapter > last);
        let order: Vec<String> = turns
            .ready
            .iter()
            .filter(|a| after(a))
            .chain(turns.ready.iter().filter(|a| !after(a)))
            .cloned()
            .collect();
        for adapter in order {
            let Some((generation, place)) = self.components.job_place(&adapter) else {
                continue;
            };
            let (name, holder, ms) = (adapter.clone(), self.replica.clone(), self.lease().ms);
            let claimed = self
                .db
                .call(move |conn| {
                    job_queue::claim_next(
                        conn,
                        &name,
                        now,
                        Lease {
                            holder: &holder,
                            ms,
                        },
                    )
                })
                .await;
            match claimed {
                Ok(Some(job)) => {
                    turns.last = Some(adapter);
                    return Some(Claimed {
                        job,
                        generation,
                        place,
                    });
                }
                // None ready now: not tried again until the queue is read again.
                Ok(None) => turns.ready.retain(|a| *a != adapter),
                Err(e) => tracing::error!("cannot claim a job: {e}"),
            }
        }
        // Nothing taken: the next call comes after a wake-up (a job queued, one ended), so it
        // reads the queue again.
        turns.ready.clear();
        None
    }

    /// Puts each adapter's number of waiting jobs on its registry entry.
    fn show_backlog(&self, waiting: &[Waiting], shown: &mut HashSet<String>) {
        let registry = self.supervisor.registry();
        let now: HashSet<String> = waiting.iter().map(|w| w.adapter.clone()).collect();
        for gone in shown.difference(&now) {
            registry.set_pending_jobs(gone, 0);
        }
        for waiting in waiting {
            registry.set_pending_jobs(&waiting.adapter, waiting.pending);
        }
        *shown = now;
    }

    /// How long until a job waiting for its retry may start (an hour when none waits; an
    /// enqueue wakes the worker earlier).
    async fn until_next_retry(&self) -> Duration {
        let now = now_ms();
        let next = self
            .db
            .call(move |conn| job_queue::next_retry(conn, now))
            .await
            .ok()
            .flatten();
        next.map_or(MAX_RETRY_AFTER, |at| {
            Duration::from_millis(u64::try_from(at - now).unwrap_or(0))
        })
    }

    async fn run_one(&self, claimed: Claimed) {
        let Claimed {
            job:
                Job {
                    task_id,
                    adapter,
                    payload,
                    attempt,
                    traceparent,
                },
            generation,
            place,
        } = claimed;
        // The job continues the trace of the request that queued it.
        let span = tracing::info_span!(
            target: TARGET,
            "job",
            otel.name = %format!("job {adapter}"),
            otel.kind = "consumer",
            service_runtime.adapter = %adapter,
            service_runtime.task_id = %task_id,
            service_runtime.attempt = i64::from(attempt),
        );
        if let Some(traceparent) = &traceparent {
            propagation::follow(&span, &propagation::from_traceparent(traceparent));
        }
        let context = JobContext {
            task_id: task_id.clone(),
            attempt,
        };
        let outcome = task_runs::claimed(
            &self.running,
            &task_id,
            &CancellationToken::new(),
            async |cancel| {
                // Its task was deleted since the claim.
                if cancel.is_cancelled() {
                    return None;
                }
                tokio::select! {
                    outcome = generation.run_job(context, payload, place).instrument(span) => Some(outcome),
                    () = cancel.cancelled() => None,
                }
            },
        )
        .await;
        let Some(outcome) = outcome else {
            return;
        };
        let ended = Arc::new(Ended::of(outcome, attempt, self.settings.attempts()));
        match self.record(&task_id, &ended).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                "a job outlived its lease and ran elsewhere too; its outcome here is dropped"
            ),
            Err(e) => tracing::error!("cannot record a job's outcome: {e}"),
        }
    }

    /// Records how a job ended. While the database is unreachable it tries again, every
    /// [`RECORD_PAUSE`] at first and then less often: the job stays this worker's meanwhile
    /// (its lease renewed once the database is back), so its outcome is kept, not lost with
    /// the job left `running` (a retry it asked for included).
    async fn record(&self, task_id: &str, ended: &Arc<Ended>) -> Result<bool> {
        let mut pause = RECORD_PAUSE;
        loop {
            let (task_id, holder, ended) =
                (task_id.to_owned(), self.replica.clone(), Arc::clone(ended));
            let recorded = self
                .db
                .call(move |conn| job_queue::finish(conn, &task_id, &holder, ended.outcome()))
                .await;
            match recorded {
                Err(Error::Unavailable(e)) => {
                    if pause == RECORD_PAUSE {
                        tracing::warn!(
                            "cannot record a job's outcome yet ({e}); trying again until the database answers"
                        );
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_RECORD_PAUSE);
                }
                other => return other,
            }
        }
    }
}

/// The first pause before a job's outcome is recorded again, and the longest.
const RECORD_PAUSE: Duration = Duration::from_millis(250);
const MAX_RECORD_PAUSE: Duration = Duration::from_secs(5);

/// How a job ended, kept until it is recorded.
enum Ended {
    Completed,
    RetryLater { run_after: i64, note: String },
    Failed { note: String },
}

impl Ended {
    /// A failure the component asked to retry runs again while it has `max` attempts left.
    fn of(outcome: Result<(), JobFailure>, attempt: u32, max: u32) -> Self {
        match outcome {
            Ok(()) => Self::Completed,
            Err(JobFailure {
                message,
                retry_after_ms: Some(after),
            }) if attempt < max => {
                let after = Duration::from_millis(after).min(MAX_RETRY_AFTER);
                Self::RetryLater {
                    run_after: now_ms() + after.as_millis() as i64,
                    note: format!(
                        "attempt {attempt} failed: {message}; runs again in {} s",
                        after.as_secs()
                    ),
                }
            }
            Err(JobFailure { message, .. }) => Self::Failed {
                note: format!("failed (attempt {attempt}): {message}"),
            },
        }
    }

    fn outcome(&self) -> Outcome<'_> {
        match self {
            Self::Completed => Outcome::Completed,
            Self::RetryLater { run_after, note } => Outcome::RetryLater {
                run_after: *run_after,
                note,
            },
            Self::Failed { note } => Outcome::Failed { note },
        }
    }
}
