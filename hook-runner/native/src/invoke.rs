//! One invocation of an admitted module (DESIGN 6.5): a fresh `Store` with fuel and a
//! memory limiter, input placed via `alloc` or new pages, `execute`, output read back.

use wasmtime::{
    Error, Extern, Func, Memory, PoolConcurrencyLimitError, Store, Trap, TypedFunc, WasmBacktrace,
};

use crate::abi::{pages_for_input, read_output};
use crate::engine::{StoreData, MAX_MEMORY_PAGES, WASM_PAGE_BYTES};
use crate::trap_message::{failure_message, trap_message};
use crate::validate::Compiled;

/// Limits of one call, already clamped to the sandbox ceilings.
#[derive(Clone, Copy, Debug)]
pub struct CallLimits {
    pub fuel: u64,
    pub max_memory_bytes: usize,
    pub max_output_bytes: usize,
}

#[derive(Debug)]
pub enum Outcome {
    Output {
        output: String,
        fuel_used: u64,
    },
    Rejected {
        fuel_used: u64,
    },
    Trap {
        trap: &'static str,
        message: String,
        fuel_used: u64,
    },
}

/// Host-side failure: nothing the guest did. The caller may retry later.
#[derive(Debug)]
pub struct HostFailure(pub String);

pub fn invoke(
    compiled: &Compiled,
    input: &[u8],
    limits: CallLimits,
) -> Result<Outcome, HostFailure> {
    let engine = compiled.pre.module().engine();
    let mut store = Store::new(engine, StoreData::new(limits.max_memory_bytes));
    store.limiter(|data| &mut data.limits);
    store
        .set_fuel(limits.fuel)
        .map_err(|e| HostFailure(format!("{e:#}")))?;
    let fuel_used =
        |store: &Store<StoreData>| limits.fuel - store.get_fuel().unwrap_or(0).min(limits.fuel);

    let instance = match compiled.pre.instantiate(&mut store) {
        Ok(instance) => instance,
        Err(err) if err.is::<PoolConcurrencyLimitError>() => {
            return Err(HostFailure(format!("sandbox capacity exhausted: {err:#}")))
        }
        Err(err) => {
            return Ok(trap_outcome(
                &err,
                "instantiation failed",
                fuel_used(&store),
            ))
        }
    };
    let memory = match instance.get_module_export(&mut store, &compiled.memory) {
        Some(Extern::Memory(m)) => m,
        _ => return Err(HostFailure("instance lost its `memory` export".into())),
    };
    let execute_export = instance.get_module_export(&mut store, &compiled.execute);
    let execute: TypedFunc<(i32, i32), i32> = typed(&store, execute_export)?;
    let alloc: Option<TypedFunc<i32, i32>> = match &compiled.alloc {
        Some(export) => {
            let alloc_export = instance.get_module_export(&mut store, export);
            Some(typed(&store, alloc_export)?)
        }
        None => None,
    };

    let Ok(len) = i32::try_from(input.len()) else {
        return Ok(abi_error(
            format!("input of {} bytes is too large", input.len()),
            fuel_used(&store),
        ));
    };
    let ptr = match place_input(&mut store, memory, alloc, input) {
        Ok(Ok(ptr)) => ptr,
        Ok(Err(problem)) => return Ok(abi_error(problem, fuel_used(&store))),
        Err(err) => return Ok(trap_outcome(&err, "alloc", fuel_used(&store))),
    };
    let result = match execute.call(&mut store, (ptr as i32, len)) {
        Ok(result) => result,
        Err(err) => return Ok(trap_outcome(&err, "execute", fuel_used(&store))),
    };
    let fuel_used = fuel_used(&store);
    if result == 0 {
        return Ok(Outcome::Rejected { fuel_used });
    }
    Ok(
        match read_output(memory.data(&store), result as u32, limits.max_output_bytes) {
            Ok(output) => Outcome::Output { output, fuel_used },
            Err(problem) => abi_error(problem, fuel_used),
        },
    )
}

fn typed<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    store: &Store<StoreData>,
    export: Option<Extern>,
) -> Result<TypedFunc<P, R>, HostFailure> {
    let func: Func = export
        .and_then(Extern::into_func)
        .ok_or_else(|| HostFailure("instance lost a function export".into()))?;
    func.typed::<P, R>(store)
        .map_err(|e| HostFailure(format!("{e:#}")))
}

/// Writes the input into guest memory: into the buffer `alloc(len)` returns, or else
/// into pages grown for it. The outer error is a guest trap, the inner one an ABI problem.
fn place_input(
    store: &mut Store<StoreData>,
    memory: Memory,
    alloc: Option<TypedFunc<i32, i32>>,
    input: &[u8],
) -> Result<Result<u32, String>, Error> {
    let len = input.len();
    let ptr = match alloc {
        Some(alloc) => alloc.call(&mut *store, len as i32)? as u32,
        None => {
            let pages = pages_for_input(len);
            match memory.grow(&mut *store, pages) {
                Ok(old_pages) => match u32::try_from(old_pages * WASM_PAGE_BYTES) {
                    Ok(ptr) => ptr,
                    Err(_) => {
                        return Ok(Err("guest memory is too large to place the input".into()))
                    }
                },
                Err(_) => {
                    let limit = match memory.ty(&*store).maximum() {
                        Some(max) if max < MAX_MEMORY_PAGES => {
                            format!("the module's declared maximum of {max} pages")
                        }
                        _ => "the sandbox memory limit".to_owned(),
                    };
                    return Ok(Err(format!(
                        "input of {len} bytes needs {pages} more page(s) of guest memory, beyond {limit} (export `alloc` to place it in memory the module has)"
                    )));
                }
            }
        }
    };
    let data = memory.data_mut(&mut *store);
    let end = ptr as usize + len;
    if end > data.len() {
        return Ok(Err(format!(
            "alloc({len}) returned {ptr:#x}, but [{ptr:#x}, {end:#x}) lies outside guest memory ({} bytes)",
            data.len()
        )));
    }
    data[ptr as usize..end].copy_from_slice(input);
    Ok(Ok(ptr))
}

fn abi_error(message: String, fuel_used: u64) -> Outcome {
    Outcome::Trap {
        trap: "abi_error",
        message,
        fuel_used,
    }
}

fn trap_outcome(err: &Error, phase: &str, fuel_used: u64) -> Outcome {
    let Some(trap) = err.downcast_ref::<Trap>() else {
        return Outcome::Trap {
            trap: "other",
            message: failure_message(format!("{phase}: {err:#}")),
            fuel_used,
        };
    };
    Outcome::Trap {
        trap: trap_kind(*trap),
        message: trap_message(phase, trap, err.downcast_ref::<WasmBacktrace>()),
        fuel_used,
    }
}

/// Maps wasmtime's trap codes onto the stable snake_case kinds of the TS API.
fn trap_kind(trap: Trap) -> &'static str {
    match trap {
        Trap::OutOfFuel => "out_of_fuel",
        Trap::StackOverflow => "stack_overflow",
        Trap::MemoryOutOfBounds => "memory_out_of_bounds",
        Trap::UnreachableCodeReached => "unreachable",
        Trap::IntegerDivisionByZero => "integer_divide_by_zero",
        Trap::IntegerOverflow => "integer_overflow",
        Trap::IndirectCallToNull | Trap::BadSignature | Trap::TableOutOfBounds => "indirect_call",
        _ => "other",
    }
}
