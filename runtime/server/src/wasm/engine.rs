//! The one wasmtime engine: pooling allocator when the address space can be reserved
//! (on-demand otherwise), and epoch interruption driven by a ticker on its own OS thread, so a
//! busy async executor can never stall it.

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// One epoch tick: how often a running guest's clock is looked at (its deadline, and whether
/// it has computed a whole slice, see `lanes`).
pub const TICK: Duration = Duration::from_millis(1);

/// Concurrent component instances; requests beyond this get 503.
pub const MAX_INSTANCES: usize = 64;

/// The largest memory any instance may have; per-adapter limits are at most this.
pub const MAX_MEMORY: usize = 256 << 20;

/// Linear memories and tables of one component (its core instances together), with or
/// without the pool: a store cannot multiply its memory budget by creating more.
pub const MAX_MEMORIES: usize = 2;
pub const MAX_TABLES: usize = 8;

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    // Trap text without a frame list: the registry shows the reason, not addresses.
    config.wasm_backtrace_max_frames(None);
    if pooling {
        // Sized from a Rust wasip2 component (3 core instances, 1 memory, 2 tables each).
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_INSTANCES as u32 * 2)
            .total_core_instances(MAX_INSTANCES as u32 * 8)
            .total_memories(MAX_INSTANCES as u32 * 2)
            .total_tables(MAX_INSTANCES as u32 * 4)
            .total_stacks(MAX_INSTANCES as u32 * 2)
            .max_core_instances_per_component(16)
            .max_memories_per_component(MAX_MEMORIES as u32)
            .max_tables_per_component(MAX_TABLES as u32)
            .max_memory_size(MAX_MEMORY)
            // A freed slot's memory (up to 2 MiB) is zeroed in place rather than unmapped, and
            // a new instance copies its data segments in rather than mapping a copy-on-write
            // image: no page faults and no cross-core TLB shootdowns per request, which is
            // what dominates short calls on a busy server (benches/teamchat_events.rs).
            .max_unused_warm_slots(MAX_INSTANCES as u32 * 2)
            .linear_memory_keep_resident(2 << 20)
            .table_keep_resident(16 << 10);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        config.memory_init_cow(false);
    }
    config
}

/// Builds the engine, pooling when possible, and starts the epoch ticker. Returns whether the
/// pool is in use.
pub fn build(pooling: bool) -> anyhow::Result<(Engine, bool)> {
    let (engine, pooled) = match Engine::new(&config(pooling)) {
        Ok(engine) => (engine, pooling),
        Err(e) if pooling => {
            tracing::warn!("cannot reserve the instance pool ({e:#}); allocating on demand");
            (Engine::new(&config(false))?, false)
        }
        Err(e) => return Err(e.into()),
    };
    let ticker = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = ticker.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })?;
    Ok((engine, pooled))
}
