//! The cron scheduler: a native adapter named `scheduler` that ticks inside the server,
//! fires due schedules as agent runs (each a task with a trace) and never overlaps a schedule
//! with itself.

pub mod cron;
mod dispatch;
pub mod manage;
pub mod plan;
pub mod store;
pub mod tick;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::Utc;
use chrono_tz::Tz;
use futures_util::FutureExt;
use serde_json::{Value, json};
use service_contract::{Adapter, AdapterContext, AdapterError, AdapterStatus, Hook};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use dispatch::Dispatcher;
pub use store::runs_in_progress;

use crate::db::Db;
use crate::tasks::TaskStatus;
use crate::telemetry::metrics::{Outcome, metrics};

pub const NAME: &str = "scheduler";
pub(crate) const DEFAULT_TICK: Duration = Duration::from_secs(30);

/// Reads `SERVICE_SCHEDULER_TICK_SECS` (a whole number of seconds, at least 1).
pub(crate) fn tick_from(value: Option<String>) -> Result<Duration, String> {
    match value {
        None => Ok(DEFAULT_TICK),
        Some(text) => match text.trim().parse::<u64>() {
            Ok(secs) if secs >= 1 => Ok(Duration::from_secs(secs)),
            _ => Err(format!(
                "SERVICE_SCHEDULER_TICK_SECS must be a whole number of seconds >= 1, got {text:?}"
            )),
        },
    }
}

pub struct Scheduler {
    db: Db,
    dispatcher: Arc<Dispatcher>,
    worker: Mutex<Option<Worker>>,
}

struct Worker {
    stop: CancellationToken,
    handle: JoinHandle<()>,
}

impl Scheduler {
    pub fn new(db: Db, dispatcher: Arc<Dispatcher>) -> Self {
        Self {
            db,
            dispatcher,
            worker: Mutex::new(None),
        }
    }

    fn launch(&self, ctx: &Arc<AdapterContext>) -> Result<(), AdapterError> {
        let tz =
            cron::zone(ctx.secrets.get("SERVICE_TZ").as_deref()).map_err(AdapterError::config)?;
        let tick = tick_from(ctx.secrets.get("SERVICE_SCHEDULER_TICK_SECS"))
            .map_err(AdapterError::config)?;
        let mut worker = self.worker.lock().unwrap_or_else(PoisonError::into_inner);
        if worker.is_some() {
            return Ok(());
        }
        let stop = CancellationToken::new();
        let ticker = Ticker {
            db: self.db.clone(),
            dispatcher: Arc::clone(&self.dispatcher),
            ctx: Arc::clone(ctx),
            tz,
            tick,
            in_flight: Arc::default(),
            reported: HashSet::new(),
        };
        let handle = tokio::spawn(ticker.run(stop.clone()));
        *worker = Some(Worker { stop, handle });
        tracing::info!(tick_secs = tick.as_secs(), zone = %tz, "scheduler started");
        Ok(())
    }
}

impl Adapter for Scheduler {
    fn name(&self) -> &str {
        NAME
    }

    fn describe(&self) -> Value {
        json!({ "version": env!("CARGO_PKG_VERSION"), "kind": "cron scheduler" })
    }

    fn start<'a>(&'a self, ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
        Some(async move { self.launch(ctx) }.boxed())
    }

    fn stop(&self) -> Option<Hook<'_>> {
        Some(
            async move {
                let worker = self
                    .worker
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(Worker { stop, handle }) = worker {
                    stop.cancel();
                    let _ = handle.await;
                }
                Ok(())
            }
            .boxed(),
        )
    }
}

/// A schedule's place in `in_flight` for as long as its run lasts; dropped when the run ends,
/// even by a panic, so the schedule is never held back for good.
struct Landed {
    in_flight: Arc<Mutex<HashSet<String>>>,
    name: String,
}

impl Landed {
    fn take_off(in_flight: Arc<Mutex<HashSet<String>>>, name: String) -> Self {
        in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone());
        Self { in_flight, name }
    }
}

impl Drop for Landed {
    fn drop(&mut self) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.name);
    }
}

/// The tick loop's state.
struct Ticker {
    db: Db,
    dispatcher: Arc<Dispatcher>,
    ctx: Arc<AdapterContext>,
    tz: Tz,
    tick: Duration,
    /// Schedules whose run has not finished yet.
    in_flight: Arc<Mutex<HashSet<String>>>,
    /// Problems already put on the registry, so a broken schedule is reported once.
    reported: HashSet<(String, String)>,
}

impl Ticker {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            self.tick_once().await;
            tokio::select! {
                () = tokio::time::sleep(self.tick) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    async fn tick_once(&mut self) {
        let registry = &self.ctx.registry;
        registry.touch(NAME);
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (tick, tz) = (self.tick, self.tz);
        let planned = self
            .db
            .call(move |conn| tick::plan_tick(conn, Utc::now(), tick, &tz, &in_flight))
            .await;
        let plan = match planned {
            Ok(plan) => plan,
            Err(e) => {
                registry.mark_error(NAME, "TickError", &e.to_string());
                return;
            }
        };
        // A problem is reported when it appears; once none is left (the schedule was fixed
        // or deleted) the scheduler is running again.
        let problems: HashSet<(String, String)> = plan.problems.into_iter().collect();
        for (schedule, problem) in problems.difference(&self.reported) {
            registry.mark_error(
                NAME,
                "ScheduleError",
                &format!("schedule {schedule:?}: {problem}"),
            );
        }
        self.reported = problems;
        if self.reported.is_empty()
            && registry
                .get(NAME)
                .is_some_and(|e| e.status == AdapterStatus::Error)
        {
            registry.mark_running(NAME);
        }
        for due in plan.due {
            let landed = Landed::take_off(Arc::clone(&self.in_flight), due.name.clone());
            let dispatcher = Arc::clone(&self.dispatcher);
            // Off the tick loop: a slow run never delays the next tick.
            tokio::spawn(async move {
                let name = due.name.clone();
                let ran = dispatcher.run(due).await;
                let outcome = match &ran {
                    Ok(ran) if ran.status == TaskStatus::Completed => "ok",
                    _ => "error",
                };
                metrics()
                    .scheduler_fires
                    .get_or_create(&Outcome { outcome })
                    .inc();
                if let Err(e) = ran {
                    tracing::error!(schedule = %name, "scheduled run could not be recorded: {e}");
                }
                drop(landed);
            });
        }
    }
}
