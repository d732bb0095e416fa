//! What a store holds: the WASI context (clocks and random only; no files, sockets,
//! environment or arguments), memory limits, and the calling adapter's identity and grant.

use std::sync::Arc;

use service_contract::{AdapterRegistry, AgentRunner, ToolRegistry};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::engine;
use super::grants::Effective;
use super::outbound::Outbound;
use crate::db::Db;
use crate::environment::Environment;
use crate::tasks::RunningTasks;

/// What the host capabilities reach, shared by every adapter.
pub struct Services {
    pub db: Db,
    pub env: Arc<Environment>,
    pub registry: Arc<AdapterRegistry>,
    pub agents: Arc<dyn AgentRunner>,
    pub tools: Arc<ToolRegistry>,
    /// Lets a task delete cancel an adapter's agent run.
    pub running: Arc<RunningTasks>,
    /// Wakes the job worker when a job is enqueued.
    pub jobs_ready: Arc<Notify>,
}

/// One adapter generation's identity and grant; every store of that generation shares it.
pub struct Caller {
    pub adapter: String,
    pub effective: Effective,
    pub outbound: Outbound,
    pub services: Arc<Services>,
}

impl Caller {
    /// Records a capability the adapter used without a grant.
    pub fn deny(&self, message: &str) {
        tracing::warn!(adapter = %self.adapter, "denied: {message}");
        self.services
            .registry
            .mark_error(&self.adapter, "CapabilityDenied", message);
    }
}

pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limits: StoreLimits,
    pub caller: Arc<Caller>,
    /// Cancels agent runs started by this call when the call is abandoned.
    pub cancel: CancellationToken,
    /// The task of the job this call runs, which its agent runs report to.
    pub job_task: Option<String>,
}

/// Guest stderr is kept (64 KiB) so a panic or allocation failure can be named.
pub const STDERR_CAPACITY: usize = 64 * 1024;

impl HostState {
    pub fn new(caller: Arc<Caller>, memory_bytes: usize, stderr: MemoryOutputPipe) -> Self {
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .memories(engine::MAX_MEMORIES)
                .tables(engine::MAX_TABLES)
                .instances(32)
                .build(),
            caller,
            cancel: CancellationToken::new(),
            job_task: None,
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
