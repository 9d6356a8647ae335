//! The compile pipeline for untrusted bytes: sniff, validate, structural scan (and the name caps), compile,
//! guest ABI export checks (`memory`, `execute`, optional `alloc`), pre-instantiation; and the
//! artifact a compile process hands back (compiled code, loaded without compiling again).

use wasmtime::{
    ExternType, FuncType, InstancePre, Linker, Module, ModuleExport, PoolConcurrencyLimitError,
    Store, Trap, ValType,
};

use crate::engine::{engine, StoreData, MAX_MEMORY_BYTES, MAX_MEMORY_PAGES, WASM_PAGE_BYTES};
use crate::names::{without_name_sections, LongNames};
use crate::refusal::{refuse, Refusal};
use crate::scan::scan;
use crate::sniff::sniff;

/// Fuel for the trial instantiation of a module without a start function; only constant
/// expressions are evaluated (element items cost fuel: a module at the item cap may run out,
/// which is not a refusal).
const TRIAL_FUEL: u64 = 1_000_000;

/// An admitted module, pre-instantiated: a call only allocates a pool slot and runs.
pub struct Compiled {
    pub pre: InstancePre<StoreData>,
    pub memory: ModuleExport,
    pub execute: ModuleExport,
    pub alloc: Option<ModuleExport>,
    pub initial_pages: u64,
    /// The module has a start function (its trial instantiation gets no fuel).
    pub has_start: bool,
}

/// A compiled module in wasmtime's serialized form, made by `compile_artifact`.
pub struct Artifact {
    pub code: Vec<u8>,
    pub has_start: bool,
}

/// Failure that is not the module's fault (engine missing, pool exhausted).
pub enum CompileError {
    Refused(Refusal),
    Host(String),
}

impl From<Refusal> for CompileError {
    fn from(r: Refusal) -> Self {
        CompileError::Refused(r)
    }
}

/// `long_names` says what a `name` section past the caps (names.rs) does: refuse the module (an
/// upload), or be left out of the compile (bytes admitted before those caps); it says too whether
/// more data segments than MAX_DATA_SEGMENTS refuse the module (an upload) or not.
pub fn compile(bytes: &[u8], long_names: LongNames) -> Result<Compiled, CompileError> {
    sniff(bytes)?;
    let engine = engine().map_err(CompileError::Host)?;
    Module::validate(engine, bytes).map_err(|e| {
        refuse(
            "invalid_module",
            format!("invalid WebAssembly module: {e:#}"),
        )
    })?;
    let facts = scan(bytes)?;
    // An upload's: bytes stored before the cap compiled in seconds and keep running.
    if let (Some(refusal), LongNames::Refuse) = (facts.many_data_segments, long_names) {
        return Err(refusal.into());
    }
    let unnamed;
    let bytes = match (facts.long_names, long_names) {
        (None, _) => bytes,
        (Some(refusal), LongNames::Refuse) => return Err(refusal.into()),
        (Some(_), LongNames::Drop) => {
            unnamed = without_name_sections(bytes)?;
            &unnamed[..]
        }
    };
    // `from_binary` never accepts text and never deserializes precompiled code. The bytes
    // are valid wasm by now, so a failure here is a sandbox limit (tables, pool sizes).
    let module = Module::from_binary(engine, bytes).map_err(|e| {
        refuse(
            "exceeds_sandbox_limits",
            format!("module does not fit the sandbox: {e:#}"),
        )
    })?;
    prepare(module, facts.has_start)
}

/// Admits and compiles `bytes` as `compile` does, then serializes the compiled code for
/// `load_artifact` in another process running this same addon (and so the same engine settings).
pub fn compile_artifact(bytes: &[u8], long_names: LongNames) -> Result<Artifact, CompileError> {
    let compiled = compile(bytes, long_names)?;
    let code = compiled.pre.module().serialize().map_err(|e| {
        CompileError::Host(format!("serializing the compiled module failed: {e:#}"))
    })?;
    Ok(Artifact {
        code,
        has_start: compiled.has_start,
    })
}

/// Loads what `compile_artifact` made and checks it as a fresh compile is checked, without
/// compiling again.
///
/// # Safety
/// wasmtime runs the artifact's machine code as it is: `code` must come from `compile_artifact`
/// of this addon, handed over by a process the caller started for it (the hook-runner's compile
/// process, over its private IPC pipe), never from storage or a request.
pub unsafe fn load_artifact(code: &[u8], has_start: bool) -> Result<Compiled, CompileError> {
    let engine = engine().map_err(CompileError::Host)?;
    // SAFETY: the caller vouches for the bytes (above); wasmtime checks they were made by this
    // wasmtime version with compatible engine settings and refuses them otherwise.
    let module = unsafe { Module::deserialize(engine, code) }
        .map_err(|e| CompileError::Host(format!("loading the compiled module failed: {e:#}")))?;
    prepare(module, has_start)
}

/// The guest ABI checks, pre-instantiation and trial instantiation of a compiled module.
fn prepare(module: Module, has_start: bool) -> Result<Compiled, CompileError> {
    let (initial_pages, maximum_pages) = check_memory(&module)?;
    check_func(&module, "execute", &[ValType::I32, ValType::I32], true)?;
    let has_alloc = check_func(&module, "alloc", &[ValType::I32], false)?;
    if !has_alloc {
        check_room_for_input(initial_pages, maximum_pages)?;
    }

    let pre = Linker::new(module.engine())
        .instantiate_pre(&module)
        .map_err(|e| refuse("invalid_module", format!("module cannot be linked: {e:#}")))?;
    trial_instantiate(&pre, has_start)?;
    let export = |name: &str| module.get_export_index(name);
    Ok(Compiled {
        memory: export("memory").ok_or_else(|| host_bug("memory"))?,
        execute: export("execute").ok_or_else(|| host_bug("execute"))?,
        alloc: if has_alloc {
            Some(export("alloc").ok_or_else(|| host_bug("alloc"))?)
        } else {
            None
        },
        initial_pages,
        has_start,
        pre,
    })
}

fn host_bug(name: &str) -> CompileError {
    CompileError::Host(format!("export `{name}` vanished after validation"))
}

fn extern_kind(ty: &ExternType) -> &'static str {
    match ty {
        ExternType::Func(_) => "function",
        ExternType::Memory(_) => "memory",
        ExternType::Table(_) => "table",
        ExternType::Global(_) => "global",
        ExternType::Tag(_) => "tag",
    }
}

/// Without `alloc` the input goes into pages grown for it: a memory that cannot grow (its
/// declared maximum, or the sandbox's 160 pages, reached at the start) could never take one.
fn check_room_for_input(initial_pages: u64, maximum_pages: Option<u64>) -> Result<(), Refusal> {
    let limit = maximum_pages.map_or(MAX_MEMORY_PAGES, |max| max.min(MAX_MEMORY_PAGES));
    if initial_pages < limit {
        return Ok(());
    }
    Err(refuse(
        "missing_export",
        format!(
            "module has no `alloc` and its memory cannot grow ({initial_pages} initial pages of at most {limit}), so no input could be placed: export `alloc`, or leave the memory room to grow"
        ),
    ))
}

/// Returns the exported memory's initial size and declared maximum, in pages.
fn check_memory(module: &Module) -> Result<(u64, Option<u64>), Refusal> {
    let memory = match module.get_export("memory") {
        Some(ExternType::Memory(m)) => m,
        Some(other) => {
            return Err(refuse(
                "bad_export_type",
                format!(
                    "export `memory` must be a memory, found a {}",
                    extern_kind(&other)
                ),
            ))
        }
        None => {
            return Err(refuse(
                "missing_export",
                "module must export its linear memory as `memory`",
            ))
        }
    };
    if memory.is_64() || memory.is_shared() || memory.page_size() != WASM_PAGE_BYTES {
        return Err(refuse(
            "bad_export_type",
            "`memory` must be an unshared 32-bit memory with 64 KiB pages",
        ));
    }
    Ok((memory.minimum(), memory.maximum()))
}

/// Checks export `name` is a function `params -> i32`; returns whether it exists.
fn check_func(
    module: &Module,
    name: &str,
    params: &[ValType],
    required: bool,
) -> Result<bool, Refusal> {
    let expected = signature(params.iter().cloned(), [ValType::I32]);
    match module.get_export(name) {
        None if required => Err(refuse(
            "missing_export",
            format!("module must export a function `{name}` of type {expected}"),
        )),
        None => Ok(false),
        Some(ExternType::Func(f)) if has_signature(&f, params) => Ok(true),
        Some(ExternType::Func(f)) => Err(refuse(
            "bad_export_type",
            format!(
                "export `{name}` must have type {expected}, found {}",
                signature(f.params(), f.results())
            ),
        )),
        Some(other) => Err(refuse(
            "bad_export_type",
            format!(
                "export `{name}` must be a function of type {expected}, found a {}",
                extern_kind(&other)
            ),
        )),
    }
}

fn has_signature(f: &FuncType, params: &[ValType]) -> bool {
    let results: Vec<ValType> = f.results().collect();
    f.params().len() == params.len()
        && f.params().zip(params).all(|(a, b)| ValType::eq(&a, b))
        && results.len() == 1
        && results
            .first()
            .is_some_and(|r| ValType::eq(r, &ValType::I32))
}

fn signature(
    params: impl IntoIterator<Item = ValType>,
    results: impl IntoIterator<Item = ValType>,
) -> String {
    let list = |it: &mut dyn Iterator<Item = ValType>| {
        it.map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
    };
    format!(
        "({}) -> ({})",
        list(&mut params.into_iter()),
        list(&mut results.into_iter())
    )
}

/// Instantiates once so that instantiation-time failures (segments with computed
/// offsets, pool limits) are reported now rather than on every run. No guest code may
/// run at compile time: a module with a start function gets zero fuel, so its start
/// function stops at the first fuel check (and segment problems surface at run time).
fn trial_instantiate(pre: &InstancePre<StoreData>, has_start: bool) -> Result<(), CompileError> {
    let mut store = Store::new(pre.module().engine(), StoreData::new(MAX_MEMORY_BYTES));
    store.limiter(|data| &mut data.limits);
    let fuel = if has_start { 0 } else { TRIAL_FUEL };
    store
        .set_fuel(fuel)
        .map_err(|e| CompileError::Host(format!("{e:#}")))?;
    let Err(err) = pre.instantiate(&mut store) else {
        return Ok(());
    };
    if err.is::<PoolConcurrencyLimitError>() {
        return Err(CompileError::Host(format!(
            "sandbox capacity exhausted: {err:#}"
        )));
    }
    match err.downcast_ref::<Trap>() {
        // A start function stopped at once, or segments whose setting up costs more than the
        // trial's fuel (a run has more, and is charged for it): nothing wrong is known yet.
        Some(Trap::OutOfFuel) => Ok(()),
        Some(trap) => Err(refuse(
            "instantiation_failed",
            format!("instantiating the module traps before any guest code runs ({trap}): a data or element segment does not fit its memory or table"),
        )
        .into()),
        None => Err(refuse(
            "exceeds_sandbox_limits",
            format!("module cannot be instantiated within the sandbox limits: {err:#}"),
        )
        .into()),
    }
}
