//! Where guest code runs, so that a guest that computes (or spins) never holds a thread the
//! API needs.
//!
//! A call starts on the caller's executor: nearly every call finishes within microseconds, and
//! a hop to another thread would cost more than the call. The store's epoch callback watches how
//! much CPU the current poll of the call has used; once the guest has computed for longer than
//! [`SLICE`] without waiting on the host, the call moves, at its next yield, to the guest
//! lane. CPU time, not wall time: on a busy machine a short call is often preempted for longer
//! than a slice, and counting that would send well-behaved adapters to the lane, whose threads
//! a busy machine gives little time. The lane is a runtime of its own whose threads get the scheduler's
//! smallest share (`SCHED_BATCH`, nice 19). There a computing guest yields every slice,
//! so guests on the lane take turns, and the API's threads preempt them the moment they have
//! work.
//!
//! The calls of an adapter whose calls needed the lane recently ([`HEAVY_FOR`]) start there,
//! and a host call handed a large byte list ([`Slice::to_lane`]) moves there before it works on
//! it: host work done for a guest (copying its memory, hashing it) is the guest's time, not
//! the API's. (Well-behaved jobs stay off the lane: on a busy machine its threads may wait
//! long for a core, and a job's steps, a post and the record that it was posted, say, should
//! follow each other closely.)
//!
//! Host work a guest asks for (database, agent runs, outbound HTTP) runs on the host's own
//! executor through [`on_host`], never on the lane: a database lock or a pooled connection
//! must not depend on a thread the scheduler runs last.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

/// How long a guest may compute in one go: on the caller's executor before it moves to the
/// lane, and on the lane before it lets the next guest run.
pub(crate) const SLICE: Duration = Duration::from_millis(2);

/// How long an adapter whose call needed the lane has its requests start there.
pub(crate) const HEAVY_FOR: Duration = Duration::from_secs(10);

/// Host work on this many bytes of a guest's or more goes to the lane first.
pub(crate) const HEAVY_BYTES: usize = 64 << 10;

static START: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Not yet read in this poll (see [`Slice::spent`]).
const UNREAD: u64 = u64::MAX;

thread_local! {
    static ON_LANE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn micros(at: Instant) -> u64 {
    at.saturating_duration_since(*START).as_micros() as u64
}

/// One call's clock, shared with its store's epoch callback.
pub struct Slice {
    /// The thread's CPU time (µs) at the first epoch tick of the current poll, [`UNREAD`] until
    /// then: reading it is a system call, so a poll that ends before a tick (nearly all) never
    /// pays for one.
    poll_cpu: AtomicU64,
    /// Set by the epoch callback: the call should leave the caller's executor.
    wants_lane: AtomicBool,
}

impl Default for Slice {
    fn default() -> Self {
        Self {
            poll_cpu: AtomicU64::new(UNREAD),
            wants_lane: AtomicBool::new(false),
        }
    }
}

impl Slice {
    /// Whether the guest has computed a whole slice in the current poll, counted from the
    /// poll's first epoch tick; if so, it is asked to move to the lane (a no-op once there).
    /// Called by the epoch callback, on the thread running the guest.
    pub fn spent(&self) -> bool {
        let now = thread_cpu_micros();
        let first = self.poll_cpu.load(Ordering::Relaxed);
        if first == UNREAD {
            self.poll_cpu.store(now, Ordering::Relaxed);
            return false;
        }
        let spent = now.saturating_sub(first) >= SLICE.as_micros() as u64;
        if spent {
            self.wants_lane.store(true, Ordering::Relaxed);
        }
        spent
    }

    fn begin_poll(&self) {
        self.poll_cpu.store(UNREAD, Ordering::Relaxed);
    }

    /// Moves the call to the lane, for host work of its own (a no-op there already).
    pub(crate) async fn to_lane(&self) {
        if ON_LANE.with(|on| on.get()) {
            return;
        }
        self.wants_lane.store(true, Ordering::Relaxed);
        tokio::task::yield_now().await;
    }

    /// Whether the call went to the lane on its way.
    pub(crate) fn went_to_lane(&self) -> bool {
        self.wants_lane.load(Ordering::Relaxed)
    }
}

/// When an adapter's calls last needed the lane (µs since [`START`], 0: never).
#[derive(Debug, Default)]
pub struct Heavy(AtomicU64);

impl Heavy {
    /// Every call starts on the lane: a shadow build's, which must never take the API's
    /// threads.
    pub(crate) fn always() -> Self {
        Self(AtomicU64::new(u64::MAX))
    }

    pub fn mark(&self) {
        self.0
            .fetch_max(micros(Instant::now()).max(1), Ordering::Relaxed);
    }

    /// Where its next call starts: on the lane within [`HEAVY_FOR`] of the last mark.
    pub fn start(&self) -> Start {
        let marked = self.0.load(Ordering::Relaxed);
        let recent = marked != 0
            && micros(Instant::now()).saturating_sub(marked) < HEAVY_FOR.as_micros() as u64;
        if recent { Start::OnLane } else { Start::Here }
    }
}

/// Polls a call, noting when each poll begins.
struct Clocked<F> {
    slice: Arc<Slice>,
    call: Pin<Box<F>>,
}

impl<F: Future> Future for Clocked<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.slice.begin_poll();
        self.call.as_mut().poll(cx)
    }
}

/// Where a call starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// On the caller's executor, for the microseconds most calls take.
    Here,
    OnLane,
}

/// How far a lane's threads stand back for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// `SCHED_BATCH`, nice 19: the smallest share, taken in turns with other work.
    Batch,
    /// `SCHED_IDLE`: only what nothing else wants (shadow builds' calls).
    Idle,
}

/// The guest lane, started the first time a guest needs it.
pub(crate) struct GuestLane {
    threads: usize,
    priority: Priority,
    runtime: OnceLock<Runtime>,
    /// Held while the runtime is built, so only one is (dropping a spare one on an executor
    /// thread would panic).
    building: Mutex<()>,
}

impl Default for GuestLane {
    /// A thread per core.
    fn default() -> Self {
        Self::new(
            std::thread::available_parallelism().map_or(2, usize::from),
            Priority::Batch,
        )
    }
}

impl GuestLane {
    pub(crate) fn new(threads: usize, priority: Priority) -> Self {
        Self {
            threads,
            priority,
            runtime: OnceLock::new(),
            building: Mutex::new(()),
        }
    }

    fn handle(&self) -> std::io::Result<&Handle> {
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime.handle());
        }
        let _building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime.handle());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.threads)
            .thread_name("wasm-guest")
            .on_thread_start({
                let priority = self.priority;
                move || {
                    ON_LANE.with(|on| on.set(true));
                    lower_priority(priority);
                }
            })
            .enable_all()
            .build()?;
        Ok(self.runtime.get_or_init(|| runtime).handle())
    }

    /// Runs a guest call here until it has computed a whole slice, then on the lane; or on
    /// the lane from the start when `start` says so.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        slice: Arc<Slice>,
        start: Start,
        call: impl Future<Output = wasmtime::Result<T>> + Send + 'static,
    ) -> wasmtime::Result<T> {
        let mut call = Clocked {
            slice: Arc::clone(&slice),
            call: Box::pin(call),
        };
        if start == Start::Here {
            let finished_here = poll_fn(|cx| match Pin::new(&mut call).poll(cx) {
                Poll::Ready(output) => Poll::Ready(Some(output)),
                Poll::Pending if slice.wants_lane.load(Ordering::Relaxed) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            })
            .await;
            if let Some(output) = finished_here {
                return output;
            }
        } else {
            slice.wants_lane.store(true, Ordering::Relaxed);
        }
        let lane = self.handle().map_err(wasmtime::Error::msg)?;
        match AbortOnDropHandle::new(lane.spawn(call)).await {
            Ok(output) => output,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(wasmtime::Error::msg("the guest lane shut down")),
        }
    }
}

impl Drop for GuestLane {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is not allowed on an executor thread.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs host work a guest asked for on the host's executor (`host`), awaited from wherever the
/// guest runs. On the host's executor already, it runs in place.
pub(crate) async fn on_host<T: Send + 'static>(
    host: &Handle,
    work: impl Future<Output = T> + Send + 'static,
) -> T {
    if !ON_LANE.with(|on| on.get()) {
        return work.await;
    }
    // The guest call's span goes on as the host work's parent (when traces are exported).
    match AbortOnDropHandle::new(host.spawn(work.in_current_span())).await {
        Ok(output) => output,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The host's runtime is shutting down; the guest's call ends with it.
        Err(_) => std::future::pending().await,
    }
}

/// The CPU time the calling thread has used, in µs.
fn thread_cpu_micros() -> u64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain syscall writing into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    time.tv_sec as u64 * 1_000_000 + time.tv_nsec as u64 / 1_000
}

/// Lane threads get the scheduler's smallest share (`SCHED_BATCH`, nice 19): an ordinary
/// thread that wants the CPU preempts them, yet they still advance on a machine other
/// processes keep busy (under `SCHED_IDLE` they waited there until their calls' deadlines).
fn lower_priority(priority: Priority) {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        let policy = match priority {
            Priority::Batch => libc::SCHED_BATCH,
            Priority::Idle => libc::SCHED_IDLE,
        };
        // SAFETY: plain syscalls on the calling thread (0, or its own id) with valid arguments.
        let lowered = unsafe {
            libc::sched_setscheduler(0, policy, &param) == 0
                && libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) == 0
        };
        if !lowered {
            tracing::warn!(
                "cannot lower the guest lane's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compute(cpu: Duration) {
        let until = thread_cpu_micros() + cpu.as_micros() as u64;
        while thread_cpu_micros() < until {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_slice_is_cpu_spent_in_one_poll_from_its_first_tick() {
        let slice = Slice::default();
        slice.begin_poll();
        assert!(!slice.spent(), "the first tick only reads the clock");
        std::thread::sleep(SLICE * 2);
        assert!(!slice.spent(), "waiting is not computing");
        assert!(!slice.wants_lane.load(Ordering::Relaxed));
        compute(SLICE);
        assert!(slice.spent());
        assert!(slice.wants_lane.load(Ordering::Relaxed));
        slice.begin_poll();
        assert!(!slice.spent(), "a new poll starts a new slice");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_call_that_asks_for_the_lane_finishes_there_and_host_work_comes_back() {
        let lane = GuestLane::default();
        let host = Handle::current();
        let slice = Arc::new(Slice::default());
        let asked = Arc::clone(&slice);
        let (on_lane, host_side) = lane
            .run(slice, Start::Here, async move {
                asked.wants_lane.store(true, Ordering::Relaxed);
                tokio::task::yield_now().await;
                let on_lane = ON_LANE.with(|on| on.get());
                let host_side = on_host(&host, async { ON_LANE.with(|on| on.get()) }).await;
                Ok((on_lane, host_side))
            })
            .await
            .unwrap();
        assert!(on_lane, "the call moved to the lane");
        assert!(!host_side, "host work ran on the host's executor");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn background_calls_start_on_the_lane_and_host_work_can_ask_for_it() {
        let lane = GuestLane::default();
        let slice = Arc::new(Slice::default());
        let started_on_lane = lane
            .run(Arc::clone(&slice), Start::OnLane, async {
                Ok(ON_LANE.with(|on| on.get()))
            })
            .await
            .unwrap();
        assert!(started_on_lane);
        assert!(slice.went_to_lane());

        let slice = Arc::new(Slice::default());
        let asking = Arc::clone(&slice);
        let moved = lane
            .run(Arc::clone(&slice), Start::Here, async move {
                let before = ON_LANE.with(|on| on.get());
                asking.to_lane().await;
                Ok((before, ON_LANE.with(|on| on.get())))
            })
            .await
            .unwrap();
        assert_eq!(
            moved,
            (false, true),
            "host work asked for the lane and got it"
        );
        assert!(slice.went_to_lane());
    }
}
