//! What a store holds: the WASI context (clocks and random only; no files, sockets,
//! environment or arguments), the `wasi:http` context (its requests go through the
//! `outbound-http` policy), memory limits, and the calling adapter's identity, grant and
//! per-capability state.

use std::sync::{Arc, PoisonError, RwLock};

use service_contract::{AdapterRegistry, AgentRunner, FailureKind, ToolRegistry};
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::caps::{Granted, RunContext, States, WasiHttpHooks};
use super::grants::Record;
use super::guest_lane::{HEAVY_BYTES, Heavy, Slice};
use super::pool::Membership;
use super::recording::{Answer, RecordedClocks, RecordedRandom, Refusable, Tape, Writer};
use super::sandbox::background_share;
use super::shadow::{Shadow, Turn};
use super::wasmtime_config;
use crate::adapters::DbApprovals;
use crate::bus::Bus;
use crate::db::Db;
use crate::settings_store::SettingsStore;
use crate::task_runs::AgentTasks;

/// What the host capabilities reach, shared by every adapter.
pub struct Services {
    /// The components' own connection: a guest's writes never hold the API's.
    pub db: Db,
    pub env: Arc<SettingsStore>,
    pub registry: Arc<AdapterRegistry>,
    pub agents: Arc<dyn AgentRunner>,
    pub agent_tasks: AgentTasks,
    pub tools: Arc<ToolRegistry>,
    /// Tells this replica's job worker and the others' that a job is enqueued.
    pub bus: Arc<Bus>,
    /// Decides approvals of the component's runs.
    pub approvals: DbApprovals,
    /// The host's executor, where host work a guest asks for runs (see `guest_lane`).
    pub host: Handle,
}

/// One loaded component's identity and grant; every store of it shares this.
pub struct Caller {
    pub adapter: String,
    pub granted: Granted,
    pub states: States,
    /// Its instances at once (`limits.max_instances`).
    pub instances: Arc<Semaphore>,
    /// The part of them its background calls (jobs, hooks) may hold; requests keep the rest.
    pub background: Arc<Semaphore>,
    /// When its calls last needed the lane.
    pub heavy: Heavy,
    /// Its name in the server's pool of instances: its own, or `<name> (shadow)` for a
    /// shadow build, which has a share of its own.
    pub(crate) pooled_as: String,
    /// A new build run beside it on its calls (`adapters install --shadow`).
    pub(crate) shadow: RwLock<Option<Arc<Shadow>>>,
    /// Writes its recordings.
    pub(crate) recordings: Writer,
    pub services: Arc<Services>,
    /// A loaded adapter's place among those the server keeps instances for; none while a
    /// component is only being described.
    _member: Option<Membership>,
}

impl Caller {
    pub fn new(
        adapter: &str,
        granted: Granted,
        services: Arc<Services>,
        member: Option<Membership>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            _member: member,
            heavy: Heavy::default(),
            pooled_as: adapter.to_owned(),
            shadow: RwLock::default(),
            recordings: Writer::default(),
            adapter: adapter.to_owned(),
            states: States::new(&granted)?,
            instances: Arc::new(Semaphore::new(granted.limits.max_instances as usize)),
            background: Arc::new(Semaphore::new(background_share(
                granted.limits.max_instances as usize,
            ))),
            granted,
            services,
        })
    }

    /// As a shadow build of its adapter, pooled as `pooled_as`: its calls run on the lane.
    pub(crate) fn into_shadow(mut self, pooled_as: String) -> Self {
        self.heavy = Heavy::always();
        self.pooled_as = pooled_as;
        self
    }

    /// Whether it is a shadow build (which must never mark the adapter's entry).
    pub(crate) fn is_shadow(&self) -> bool {
        self.pooled_as != self.adapter
    }

    /// Its shadow build's turn on a call starting now, when one is loaded and takes it.
    pub(crate) fn shadowed(&self) -> Option<Turn> {
        let shadow = self.shadow.read().unwrap_or_else(PoisonError::into_inner);
        shadow.as_ref()?.turn(self.granted.limits.shadow_percent)
    }

    /// Records a failure on the adapter's registry entry: the one way the component host
    /// does (calls, tools, grants, quotas, the guest's own `mark-error`).
    pub fn record(&self, kind: impl AsRef<str>, message: &str) {
        if self.is_shadow() {
            return;
        }
        self.services
            .registry
            .mark_error(&self.adapter, kind, message);
    }

    /// Records a capability the adapter used without a grant.
    pub fn deny(&self, message: &str) {
        tracing::warn!(adapter = %self.adapter, "denied: {message}");
        self.record(FailureKind::CapabilityDenied, message);
    }

    /// Records a quota the adapter went past.
    pub(crate) fn over_quota(&self, message: &str) {
        tracing::warn!(adapter = %self.adapter, "over quota: {message}");
        self.record(FailureKind::QuotaExceeded, message);
    }
}

/// The job a call runs, which its agent runs report to.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub task_id: String,
    pub attempt: u32,
}

pub struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    outgoing: WasiHttpHooks,
    table: ResourceTable,
    pub limits: Limits,
    pub caller: Arc<Caller>,
    /// Cancels agent runs started by this call when the call is abandoned.
    pub cancel: CancellationToken,
    pub job: Option<JobContext>,
    /// The agent run this call serves (a tool call), which its own runs continue.
    pub run: Option<RunContext>,
    /// The call's clock, which host work on a guest's large inputs asks for the lane.
    pub slice: Arc<Slice>,
    /// Set when the call left the instance unfit for another (see `reuse`).
    pub(crate) unfit: bool,
    /// The recording of the call, when the adapter's calls are recorded (`record`).
    pub(crate) tape: Option<Tape>,
}

/// The store's limits, noting a growth they refused: an instance that hit them is not kept for
/// another request, even when the guest carried on.
pub struct Limits {
    store: StoreLimits,
    pub(crate) hit: bool,
}

impl Limits {
    /// `allowed`, noted when it is a refusal.
    fn note(&mut self, allowed: wasmtime::Result<bool>) -> wasmtime::Result<bool> {
        self.hit |= matches!(allowed, Ok(false));
        allowed
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.store.memory_growing(current, desired, maximum);
        self.note(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.store.table_growing(current, desired, maximum);
        self.note(allowed)
    }

    fn instances(&self) -> usize {
        self.store.instances()
    }

    fn tables(&self) -> usize {
        self.store.tables()
    }

    fn memories(&self) -> usize {
        self.store.memories()
    }
}

/// Guest stderr is kept (64 KiB) so a panic or allocation failure can be named.
pub(crate) const STDERR_CAPACITY: usize = 64 * 1024;

impl HostState {
    pub fn new(
        caller: Arc<Caller>,
        memory_bytes: usize,
        stderr: MemoryOutputPipe,
        slice: Arc<Slice>,
    ) -> Self {
        let mut wasi = WasiCtxBuilder::new();
        wasi.stderr(stderr)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        let shadowed = caller
            .shadow
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        let tape = (caller.granted.record != Record::Off || shadowed).then(Tape::default);
        if let Some(tape) = &tape {
            wasi.wall_clock(RecordedClocks::wall(tape.clone()))
                .monotonic_clock(RecordedClocks::monotonic(tape.clone()))
                .secure_random(RecordedRandom::new(tape.clone(), true))
                .insecure_random(RecordedRandom::new(tape.clone(), false));
        }
        Self {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            outgoing: WasiHttpHooks::new(Arc::clone(&caller), tape.clone()),
            table: ResourceTable::new(),
            limits: Limits {
                store: StoreLimitsBuilder::new()
                    .memory_size(memory_bytes)
                    .memories(wasmtime_config::MAX_MEMORIES)
                    .tables(wasmtime_config::MAX_TABLES)
                    .instances(32)
                    .build(),
                hit: false,
            },
            caller,
            cancel: CancellationToken::new(),
            job: None,
            run: None,
            slice,
            unfit: false,
            tape,
        }
    }

    /// An import's arguments to note, made only when the call is recorded.
    pub(crate) fn args(
        &self,
        args: impl FnOnce() -> serde_json::Value,
    ) -> Option<serde_json::Value> {
        self.tape.as_ref().map(|_| args())
    }

    /// What the replayed recording answers to an import (`None` when no replay runs): its
    /// recorded result, a refusal (a shadow's import the live call did not make), or an
    /// error that ends a replay where it diverged.
    pub(crate) fn replayed<T: serde::de::DeserializeOwned + Refusable>(
        &self,
        import: &str,
        args: &Option<serde_json::Value>,
    ) -> wasmtime::Result<Option<T>> {
        let (Some(tape), Some(args)) = (&self.tape, args) else {
            return Ok(None);
        };
        match tape.answer(import, args) {
            None => Ok(None),
            Some(Answer::Recorded(value)) => serde_json::from_value(value).map(Some).map_err(|e| {
                wasmtime::Error::msg(format!(
                    "the recording's answer to {import} does not fit: {e}"
                ))
            }),
            Some(Answer::Refused(why)) => Ok(Some(T::refused(why))),
            Some(Answer::Ended(why)) => Err(wasmtime::Error::msg(why)),
        }
    }

    /// Notes an import, with its arguments (from [`Self::args`]) and result, on the call's
    /// recording.
    pub(crate) fn taped(
        &self,
        import: &'static str,
        args: Option<serde_json::Value>,
        result: &impl serde::Serialize,
    ) {
        if let (Some(tape), Some(args)) = (&self.tape, args) {
            tape.note(import, || args, result);
        }
    }

    /// Readies a kept store for its next call (the call's own clock and cancellation).
    pub(crate) fn next_call(&mut self, slice: Arc<Slice>) {
        self.slice = slice;
        self.cancel = CancellationToken::new();
    }

    /// Drops every resource the guest left behind (its call has returned): a `wasi:http`
    /// body it never finished ends where it stopped.
    pub(crate) fn drop_resources(&mut self) {
        self.table = ResourceTable::new();
        // The guest's own handles (a stream it keeps) went with them.
        self.unfit = true;
    }

    /// Host work on `bytes` of the guest's (hashing them, storing them) is the guest's time:
    /// past [`HEAVY_BYTES`] the call goes to the lane first, and the adapter's next requests
    /// start there.
    pub fn heavy(&self, bytes: usize) -> impl Future<Output = ()> + Send + 'static {
        let slice = (bytes >= HEAVY_BYTES).then(|| {
            self.caller.heavy.mark();
            Arc::clone(&self.slice)
        });
        async move {
            if let Some(slice) = slice {
                slice.to_lane().await;
            }
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outgoing,
        }
    }
}
