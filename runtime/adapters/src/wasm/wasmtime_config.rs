//! The wasmtime engines: pooling allocator when the address space can be reserved (on-demand
//! otherwise), and epoch interruption driven by a ticker on its own OS thread, so a busy async
//! executor can never stall it. Flavours differ in how an instance's memory starts (small
//! components copy their data segments in, large ones, interpreters with a snapshot of their
//! state, map them copy-on-write) and in the compiler: Cranelift optimizes, Winch compiles a
//! first generation in a fraction of the time while Cranelift works behind it.

use std::time::Duration;

use service_engine::config::SandboxSection;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy};

/// One epoch tick: how often a running guest's clock is looked at (its deadline, and whether
/// it has computed a whole slice, see `guest_lane`).
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Concurrent component instances; requests beyond this get 503.
pub(crate) const MAX_INSTANCES: usize = 64;

/// The most instances one adapter may be granted (`limits.max_instances`): half the server's,
/// so no grant alone claims them all (each adapter's reservation, `pool`, does the rest).
pub(crate) const MAX_INSTANCES_PER_ADAPTER: usize = MAX_INSTANCES / 2;

/// The largest memory any instance may have; per-adapter limits are at most this.
pub(crate) const MAX_MEMORY: usize = 256 << 20;

/// Linear memories and tables of one component (its core instances together), with or
/// without the pool: a store cannot multiply its memory budget by creating more.
pub(crate) const MAX_MEMORIES: usize = 2;
pub(crate) const MAX_TABLES: usize = 8;

/// How an instance's linear memory gets its initial contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoryInit {
    /// Copied in, into a slot zeroed in place: no page faults and no cross-core TLB shootdowns
    /// per request, which is what short calls of small guests spend their time on
    /// (benches/teamchat_events.rs).
    Copy,
    /// Mapped copy-on-write from the component's memory image: only the pages a call touches
    /// cost anything, so a 20 MB interpreter snapshot starts in microseconds
    /// (benches/guest_languages.rs).
    CopyOnWrite,
}

/// Which compiler an engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compiler {
    /// Cranelift: fast code, slow to compile (seconds for an interpreter of 12-18 MB).
    Optimizing,
    /// Winch, the baseline compiler: one pass, several times faster to compile, slower code.
    Baseline,
}

fn config(pooling: bool, init: MemoryInit, compiler: Compiler, reset: &SandboxSection) -> Config {
    let mut config = Config::new();
    match compiler {
        Compiler::Baseline => drop(config.strategy(Strategy::Winch)),
        // It compiles behind baseline code, on one thread of low priority
        // (`Loader::optimize`), so the requests that code serves meanwhile keep the cores.
        Compiler::Optimizing => drop(config.parallel_compilation(false)),
    }
    config.epoch_interruption(true);
    // Trap text without a frame list: the registry shows the reason, not addresses.
    config.wasm_backtrace_max_frames(None);
    config.memory_guaranteed_dense_image_size(reset.dense_image());
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
            .max_unused_warm_slots(MAX_INSTANCES as u32 * 2)
            .table_keep_resident(reset.table_keep_resident())
            .decommit_batch_size(reset.decommit_batch());
        match init {
            // Only the pages a call dirtied are put back from the image (found with Linux's
            // PAGEMAP_SCAN where the kernel has it), and they stay mapped for the next call.
            MemoryInit::CopyOnWrite
                if reset.written_pages_only() && written_pages_are_reported() =>
            {
                pool.linear_memory_keep_resident(MAX_MEMORY)
                    .pagemap_scan(wasmtime::Enabled::Auto)
            }
            // A freed slot's memory (its first `memory_keep_resident`) is zeroed in place, or
            // put back from the image, and the rest unmapped.
            _ => pool.linear_memory_keep_resident(reset.memory_keep_resident()),
        };
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config.memory_init_cow(init == MemoryInit::CopyOnWrite);
    config
}

/// Whether the kernel's record of the pages a call wrote tells every one of them: only without
/// swap. A written page that was swapped out is not reported, so it would be neither put back
/// nor unmapped, and the next instance in the slot could read it. Read when the engines are
/// built; swap turned on later is not seen (the book says so).
fn written_pages_are_reported() -> bool {
    let swapless = std::fs::read_to_string("/proc/swaps")
        .is_ok_and(|swaps| swaps.lines().skip(1).all(|line| line.trim().is_empty()));
    if !swapless {
        tracing::info!(
            "swap is on (or /proc/swaps unreadable): large components' memory is reset whole, \
             not from the pages the kernel reports written"
        );
    }
    swapless
}

/// Builds the engine, pooling when possible. Returns whether the pool is in use.
pub(super) fn build(
    pooling: bool,
    init: MemoryInit,
    compiler: Compiler,
    reset: &SandboxSection,
) -> anyhow::Result<(Engine, bool)> {
    match Engine::new(&config(pooling, init, compiler, reset)) {
        Ok(engine) => Ok((engine, pooling)),
        Err(e) if pooling => {
            tracing::warn!("cannot reserve the instance pool ({e:#}); allocating on demand");
            Ok((Engine::new(&config(false, init, compiler, reset))?, false))
        }
        Err(e) => Err(e.into()),
    }
}

/// Starts the one thread that advances the epoch of `engines` every [`TICK`], until they are
/// all dropped. One thread for all: each wake-up is a context switch, and a thread per
/// engine tripled them on a machine whose cores the requests need.
pub(crate) fn start_ticker(engines: &[&Engine]) -> std::io::Result<()> {
    let engines: Vec<_> = engines.iter().map(|engine| engine.weak()).collect();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            loop {
                let mut alive = false;
                for engine in engines.iter().filter_map(|weak| weak.upgrade()) {
                    engine.increment_epoch();
                    alive = true;
                }
                if !alive {
                    return;
                }
                std::thread::sleep(TICK);
            }
        })?;
    Ok(())
}
