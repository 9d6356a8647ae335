//! The one process-wide wasmtime `Engine` of the Sluice sandbox and the limits it enforces
//! (DESIGN 6.5): fuel, a 512 KiB wasm stack, 10 MiB memories in a pooling allocator.

use std::num::NonZeroUsize;
use std::sync::OnceLock;

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, OperatorCost, PoolingAllocationConfig, StoreLimits,
    StoreLimitsBuilder,
};

pub const WASM_PAGE_BYTES: u64 = 65_536;
/// Fuel units per invocation; there is deliberately no wall clock (no epochs): fuel_costs keeps a
/// unit near the time of a plain instruction.
pub const DEFAULT_FUEL: u64 = 50_000_000;
/// Usable linear memory: 160 wasm pages.
pub const MAX_MEMORY_BYTES: usize = 10 * 1024 * 1024;
pub const MAX_MEMORY_PAGES: u64 = MAX_MEMORY_BYTES as u64 / WASM_PAGE_BYTES;
/// Unmapped bytes after each memory slot; loads/stores with small static offsets land
/// here and fault instead of needing a second bounds check.
pub const GUARD_BYTES: u64 = 2 * 1024 * 1024;
/// Engine-wide (cranelift bakes the stack check into compiled code), so not per call.
pub const MAX_STACK_BYTES: usize = 512 * 1024;
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// Upper bound on a module upload; a module with a full 10 MiB data segment still fits.
pub const MAX_MODULE_BYTES: usize = 32 * 1024 * 1024;
/// Slots in the pooling allocator: concurrently live instances (and memories, tables).
/// Invocations run on the libuv pool (4 threads by default) or inline on the JS thread
/// (one at a time), so this is generous; the cost is virtual address space only:
/// POOL_SLOTS * (10 MiB + 2 MiB guard) ~ 12 GiB.
pub const POOL_SLOTS: u32 = 1000;
/// Per-table element cap (wasmtime's default); Rust and AssemblyScript tables are tiny.
pub const MAX_TABLE_ELEMENTS: usize = 20_000;

/// Per-store state: only the resource limiter. A fresh `Store` is built per invocation.
pub struct StoreData {
    pub limits: StoreLimits,
}

impl StoreData {
    pub fn new(max_memory_bytes: usize) -> StoreData {
        let limits = StoreLimitsBuilder::new()
            .memory_size(max_memory_bytes)
            .table_elements(MAX_TABLE_ELEMENTS)
            .instances(1)
            .memories(1)
            .tables(1)
            // memory.grow past the cap returns -1 inside the guest instead of trapping.
            .trap_on_grow_failure(false)
            .build();
        StoreData { limits }
    }
}

/// wasmtime charges every operator 1 unit (bulk ones also 1 per byte or element), but those it
/// carries out through a call into the runtime take far longer than an instruction at any length,
/// 0 included: a `(loop (memory.fill 0 0 0) (br 0))` spent 50,000,000 units in 1.7-3.6 s where a
/// plain loop spends them in ~55 ms (~1.1 ns a unit). Each flat cost here is about that operator's
/// time in such units, measured on the 2-core dev VM at length 0 (memory.fill ~180 ns, ref.func
/// 70-225 ns, memory.grow ~40 ns, elem.drop ~38 ns, table.grow ~25 ns, the others 2-13 ns), so the
/// fuel limit bounds a call's time whatever it runs.
fn fuel_costs() -> OperatorCost {
    let mut cost = OperatorCost::new();
    cost.MemoryFill = 200;
    cost.RefFunc = 160;
    cost.MemoryGrow = 48;
    cost.TableGrow = 32;
    cost.TableInit = 16;
    cost.MemoryCopy = 8;
    cost.MemoryInit = 8;
    cost.TableCopy = 8;
    cost.TableFill = 8;
    cost.DataDrop = 4;
    cost.ElemDrop = 32;
    cost
}

fn build_engine() -> Result<Engine, String> {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(POOL_SLOTS)
        .total_memories(POOL_SLOTS)
        .total_tables(POOL_SLOTS)
        .max_memories_per_module(1)
        .max_tables_per_module(1)
        .table_elements(MAX_TABLE_ELEMENTS)
        .max_memory_size(MAX_MEMORY_BYTES);

    let mut config = Config::new();
    config
        .consume_fuel(true)
        .operator_cost(fuel_costs())
        .max_wasm_stack(MAX_STACK_BYTES)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // Each pool slot reserves exactly the usable 10 MiB plus the guard, instead of
        // wasmtime's 4 GiB default reservation per memory.
        .memory_reservation(MAX_MEMORY_BYTES as u64)
        .memory_guard_size(GUARD_BYTES)
        .memory_reservation_for_growth(0)
        .memory_may_move(false)
        .guard_before_linear_memory(false)
        // No copy-on-write memory images: wasmtime would keep one per compiled module, a memfd as
        // large as the initial memory up to its last data segment (a 84-byte module with a byte
        // at 9 MiB held 9 MiB of shared memory), kept until the module's last reference is
        // collected, and not counted by the compiled-module cache. Data segments are copied into
        // the pooled memory at instantiation instead; they are at most the module's own bytes.
        .memory_init_cow(false)
        // The guest ABI is one 32-bit memory with 64 KiB pages.
        .wasm_multi_memory(false)
        .wasm_memory64(false)
        .wasm_custom_page_sizes(false)
        .wasm_backtrace_max_frames(NonZeroUsize::new(crate::trap_message::SHOWN_FRAMES));
    Engine::new(&config).map_err(|e| format!("{e:#}"))
}

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();

/// The shared engine, created on first use (it reserves the pool's address space).
pub fn engine() -> Result<&'static Engine, String> {
    ENGINE
        .get_or_init(build_engine)
        .as_ref()
        .map_err(|e| format!("the wasmtime sandbox engine could not be created: {e}"))
}
