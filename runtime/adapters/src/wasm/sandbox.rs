//! The sandboxed call. Each call gets a fresh store with the adapter's memory limit, a
//! deadline (epochs while the guest runs, plus a timer around the whole call for a guest
//! waiting in a host call), a place among the server's instances and the adapter's own, and
//! the guest lane (`guest_lane`) that keeps a computing guest off the API's threads. A failure is named
//! from what went wrong; the caller records it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use service_contract::{AdapterError, FailureKind};
use service_engine::config::SandboxSection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;
use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::exports::{Call, Exports};
use super::guest_lane::{GuestLane, Priority, Slice, Start};
use super::pool::{Instance, Membership, Pool};
use super::recording::{Outcome, Recorder};
use super::reuse::{self, Idle, Kept};
use super::state::{Caller, HostState, STDERR_CAPACITY};
use super::wasmtime_config::{self, Compiler, MemoryInit};
use crate::adapters::CallError;
use crate::telemetry::TARGET;

/// A component ready to instantiate: its pre-linked instance, exports and grant.
pub struct Prepared {
    pub pre: InstancePre<HostState>,
    pub exports: Exports,
    pub caller: Arc<Caller>,
    /// Its instances kept between requests (`reuse`), none otherwise.
    pub(crate) idle: Arc<Idle>,
}

impl Prepared {
    pub fn new(pre: InstancePre<HostState>, exports: Exports, caller: Arc<Caller>) -> Self {
        Self {
            pre,
            exports,
            caller,
            idle: Arc::default(),
        }
    }
}

/// Whether a call may wait for a free instance.
#[derive(Debug)]
pub enum Wait {
    /// A request: when none is free it gets 503 at once, not a queue.
    No,
    /// Background work (hooks, tools at load) waits its turn.
    Yes,
    /// The adapter's place is taken already (the job worker takes it before it claims a job,
    /// so a job never holds a worker while it waits); the server's is waited for.
    Holding(AdapterPlace),
}

/// How many of `instances` background calls (jobs, hooks, tool listings) may hold at once: all
/// but an eighth, which stays free for requests. A request gets 503 rather than wait, so a
/// backlog of jobs waiting on a slow model must never hold every instance.
pub(crate) fn background_share(instances: usize) -> usize {
    instances - instances / 8
}

/// One of an adapter's instances taken for background work, within its background share.
#[derive(Debug)]
pub struct AdapterPlace {
    _share: OwnedSemaphorePermit,
    _instance: OwnedSemaphorePermit,
}

impl AdapterPlace {
    /// A place among `caller`'s instances for background work, if one is free now.
    pub(crate) fn try_take(caller: &Caller) -> Option<Self> {
        Some(Self {
            _share: Arc::clone(&caller.background).try_acquire_owned().ok()?,
            _instance: Arc::clone(&caller.instances).try_acquire_owned().ok()?,
        })
    }

    async fn take(caller: &Caller) -> Self {
        Self {
            _share: waited(&caller.background).await,
            _instance: waited(&caller.instances).await,
        }
    }
}

async fn waited(semaphore: &Arc<Semaphore>) -> OwnedSemaphorePermit {
    Arc::clone(semaphore)
        .acquire_owned()
        .await
        .expect("never closed")
}

/// The places one call holds while it runs.
enum Places {
    Request {
        _adapter: OwnedSemaphorePermit,
        _server: Instance,
    },
    Background {
        _adapter: AdapterPlace,
        _server_share: OwnedSemaphorePermit,
        _server: Instance,
    },
}

/// Components this large or larger (mostly interpreters and the state they snapshot) get the
/// copy-on-write flavour of the engine; smaller ones copy their memory in.
pub(crate) const LARGE_COMPONENT_BYTES: usize = 4 << 20;

/// One engine and the linker of its host functions.
pub struct Flavor {
    engine: Engine,
    pooled: bool,
    linker: Linker<HostState>,
}

impl Flavor {
    fn new(
        pooling: bool,
        init: MemoryInit,
        compiler: Compiler,
        reset: &SandboxSection,
    ) -> anyhow::Result<Self> {
        let (engine, pooled) = wasmtime_config::build(pooling, init, compiler, reset)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        super::caps::shadow_preopens(&mut linker)?;
        super::caps::link(&mut linker)?;
        Ok(Self {
            engine,
            pooled,
            linker,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.linker
    }

    pub fn pooled(&self) -> bool {
        self.pooled
    }
}

pub struct Sandbox {
    small: Flavor,
    large: Flavor,
    /// Winch, for the first generation of a component no optimized artifact exists for yet
    /// (copy-on-write, which suits any size).
    baseline: Flavor,
    lane: GuestLane,
    /// Shadow builds' calls (see `shadow`): one thread that runs only when nothing else
    /// wants a core, so they never take from a live call, nor queue in front of one on the
    /// lane.
    shadow_lane: GuestLane,
    /// Instances of all adapters together, a share of them kept for each.
    instances: Arc<Pool>,
    /// The part of them background calls may hold.
    background: Arc<Semaphore>,
    /// Room for idle instances kept for reuse, all adapters together.
    kept: Arc<Semaphore>,
}

impl Sandbox {
    /// The engines, pooled when `pooling` (and the pool can be reserved), their freed slots
    /// reset as `reset` says.
    pub fn new(pooling: bool, reset: &SandboxSection) -> anyhow::Result<Self> {
        let small = Flavor::new(pooling, MemoryInit::Copy, Compiler::Optimizing, reset)?;
        let large = Flavor::new(
            pooling,
            MemoryInit::CopyOnWrite,
            Compiler::Optimizing,
            reset,
        )?;
        let baseline = Flavor::new(pooling, MemoryInit::CopyOnWrite, Compiler::Baseline, reset)?;
        wasmtime_config::start_ticker(&[&small.engine, &large.engine, &baseline.engine])?;
        Ok(Self {
            small,
            large,
            baseline,
            lane: GuestLane::default(),
            shadow_lane: GuestLane::new(1, Priority::Idle),
            instances: Pool::new(wasmtime_config::MAX_INSTANCES),
            background: Arc::new(Semaphore::new(background_share(
                wasmtime_config::MAX_INSTANCES,
            ))),
            kept: Arc::new(Semaphore::new(reuse::MAX_KEPT)),
        })
    }

    /// The flavour a component of `size` bytes runs in.
    pub(crate) fn flavor(&self, size: usize) -> &Flavor {
        if size >= LARGE_COMPONENT_BYTES {
            &self.large
        } else {
            &self.small
        }
    }

    /// The flavour that compiles fast: a first generation runs in it while the optimized one
    /// compiles.
    pub fn baseline(&self) -> &Flavor {
        &self.baseline
    }

    pub fn pooled(&self) -> bool {
        self.small.pooled && self.large.pooled && self.baseline.pooled
    }

    /// The instances each adapter has in use now.
    pub fn instances_in_use(&self) -> Vec<(String, usize)> {
        self.instances.in_use()
    }

    /// Counts `adapter` among the loaded ones, whose share of the instances the others
    /// leave free, while the membership lives.
    pub fn join(&self, adapter: &str) -> Membership {
        self.instances.join(adapter)
    }

    /// A place for one more instance: the adapter's own cap, then the server's (for background
    /// work, within their background shares too).
    async fn places(&self, caller: &Caller, wait: Wait) -> Result<Places, CallError> {
        let busy = |whose: &str| {
            CallError::Busy(format!(
                "{whose} are all busy; try again (limits.max_instances of {:?} is {})",
                caller.adapter, caller.granted.limits.max_instances
            ))
        };
        let adapter = match wait {
            Wait::No => {
                return Ok(Places::Request {
                    _adapter: Arc::clone(&caller.instances)
                        .try_acquire_owned()
                        .map_err(|_| busy("this adapter's instances"))?,
                    _server: self.instances.try_take(&caller.pooled_as).ok_or_else(|| {
                        busy("the instances this adapter may have of the server's")
                    })?,
                });
            }
            Wait::Yes => AdapterPlace::take(caller).await,
            Wait::Holding(place) => place,
        };
        Ok(Places::Background {
            _adapter: adapter,
            _server_share: waited(&self.background).await,
            _server: self.instances.take(&caller.pooled_as).await,
        })
    }

    /// Runs one export call of `prepared` in a fresh instance (or, for a request to an adapter
    /// granted `reuse`, one kept from its earlier requests), within `limit`.
    pub async fn call<C: Call>(
        &self,
        prepared: &Arc<Prepared>,
        call: C,
        limit: Duration,
        wait: Wait,
    ) -> Result<C::Output, CallError> {
        // Here, unless this adapter's calls needed the lane just now.
        let start = prepared.caller.heavy.start();
        let places = self.places(&prepared.caller, wait).await?;
        let caller = Arc::clone(&prepared.caller);
        let reuse = C::REUSES && caller.granted.reuse.0 > 1;
        let slice = Arc::new(Slice::default());
        let (mut store, kept_instance, stderr, served) =
            match reuse.then(|| prepared.idle.take()).flatten() {
                Some(kept) => {
                    let mut store = kept.store;
                    store.data_mut().next_call(Arc::clone(&slice));
                    call.prepare(store.data_mut());
                    (store, Some(kept.instance), kept.stderr, kept.served)
                }
                None => {
                    let engine = prepared.pre.engine();
                    let (store, stderr) = fresh_store(engine, &caller, Arc::clone(&slice), &call);
                    (store, None, stderr, 0)
                }
            };
        // What the guest wrote before this call is not this call's failure.
        let stderr_before = stderr.contents().len();
        let recorder = store.data().tape.clone().and_then(|tape| {
            Recorder::start(&caller, tape, call.export(), || {
                call.recorded(&prepared.exports)
            })
        });
        // Abandoning the call (a client gone, a deadline) cancels the agent runs it started.
        let _cancel_runs_on_drop = store.data().cancel.clone().drop_guard();
        let deadline = Instant::now() + limit;
        let clock = Arc::clone(&slice);
        store.epoch_deadline_callback(move |_| {
            let now = Instant::now();
            Ok(if now >= deadline {
                UpdateDeadline::Interrupt
            } else if clock.spent() {
                // tokio's yield goes to the back of the queue (wasmtime's own would be polled
                // again at once from the worker's LIFO slot): the other tasks run first.
                UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
            } else {
                UpdateDeadline::Continue(1)
            })
        });
        store.set_epoch_deadline(1);
        let span = tracing::info_span!(
            target: TARGET,
            "component_call",
            otel.name = %format!("{} {}", call.export(), caller.adapter),
            otel.kind = "internal",
            service_runtime.adapter = %caller.adapter,
            service_runtime.export = call.export(),
            service_runtime.reused = kept_instance.is_some(),
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let run = {
            let (prepared, stderr) = (Arc::clone(prepared), stderr.clone());
            let (slots, most) = (
                Arc::clone(&self.kept),
                caller.granted.limits.max_instances as usize,
            );
            async move {
                let _places = places;
                let instance = match kept_instance {
                    Some(instance) => instance,
                    None => prepared.pre.instantiate_async(&mut store).await?,
                };
                let output = call.call(&mut store, &instance, &prepared.exports).await?;
                let served = served + 1;
                if reuse && Kept::fit(&store, &stderr, served) {
                    prepared
                        .idle
                        .keep(&slots, most, store, instance, stderr, served);
                }
                Ok(output)
            }
        }
        .instrument(span.clone());
        let outcome = tokio::time::timeout(
            limit + Duration::from_millis(250),
            match caller.is_shadow() {
                true => &self.shadow_lane,
                false => &self.lane,
            }
            .run(Arc::clone(&slice), start, run),
        )
        .await;
        if start == Start::Here && slice.went_to_lane() {
            caller.heavy.mark();
        }
        let (kind, message) = match outcome {
            Ok(Ok(value)) => {
                if let Some(recorder) = recorder {
                    let outcome = if C::failed(&value) {
                        Outcome::Failed
                    } else {
                        Outcome::Ok
                    };
                    recorder.done(|| C::written(&value), outcome, None);
                }
                return Ok(value);
            }
            Ok(Err(e)) => classify(&e, &stderr.contents()[stderr_before..]),
            Err(_) => (FailureKind::Timeout, format!("no answer within {limit:?}")),
        };
        if let Some(recorder) = recorder {
            let error = (kind.as_str().to_owned(), message.clone());
            recorder.done(|| Value::Null, Outcome::Error, Some(error));
        }
        span.record("error.type", kind.as_str());
        span.record("otel.status_code", "error");
        Err(CallError::Failed(AdapterError::new(kind, message)))
    }
}

/// A store for a new instance of `caller`'s component, with its memory limit and its stderr.
fn fresh_store<C: Call>(
    engine: &Engine,
    caller: &Arc<Caller>,
    slice: Arc<Slice>,
    call: &C,
) -> (Store<HostState>, MemoryOutputPipe) {
    let memory = caller
        .granted
        .limits
        .memory_bytes()
        .min(wasmtime_config::MAX_MEMORY);
    let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
    let mut state = HostState::new(Arc::clone(caller), memory, stderr.clone(), slice);
    call.prepare(&mut state);
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limits);
    (store, stderr)
}

/// Names a failed call: the trap, with what the guest last wrote to stderr (a panic message
/// or an allocation failure) when it wrote anything.
fn classify(error: &wasmtime::Error, stderr: &[u8]) -> (FailureKind, String) {
    let guest = String::from_utf8_lossy(stderr).into_owned();
    let text = trap_text(error, &guest);
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => (FailureKind::Timeout, text),
        _ if guest.contains("memory allocation") || text.contains("growing memory") => {
            (FailureKind::MemoryLimit, text)
        }
        _ if guest.contains("panicked at") => (FailureKind::Panic, text),
        Some(_) => (FailureKind::Trap, text),
        None => (FailureKind::HostError, text),
    }
}

/// The error with the last few meaningful lines the guest wrote to stderr.
pub(crate) fn trap_text(error: &wasmtime::Error, guest_stderr: &str) -> String {
    // The standard "run with RUST_BACKTRACE" hint says nothing here.
    let lines: Vec<&str> = guest_stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("note: run with"))
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" ");
    if tail.is_empty() {
        format!("{error:#}")
    } else {
        format!("{error:#} ({tail})")
    }
}

#[cfg(test)]
mod tests {
    use super::background_share;

    #[test]
    fn requests_keep_an_eighth_of_the_instances() {
        assert_eq!(background_share(64), 56);
        assert_eq!(background_share(16), 14);
        assert_eq!(
            background_share(7),
            7,
            "too few to spare one: jobs may use all"
        );
    }
}
