//! Node-API surface of the Sluice sandbox addon (napi-rs): compile untrusted core wasm
//! into a handle, report limits; running it lives in run.rs. Wrapped by sandbox.ts.

mod abi;
mod engine;
mod invoke;
mod refusal;
mod run;
mod scan;
mod sniff;
mod validate;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Either, Uint8Array};
use napi::{Env, Error, Result, Task};
use napi_derive::napi;

use crate::engine::{
    DEFAULT_FUEL, GUARD_BYTES, MAX_MEMORY_BYTES, MAX_MODULE_BYTES, MAX_OUTPUT_BYTES,
    MAX_STACK_BYTES, POOL_SLOTS,
};
use crate::validate::{compile as compile_bytes, CompileError, Compiled};

/// An admitted, pre-instantiated module. Opaque to JS; cheap to share between calls.
#[napi]
pub struct CompiledModule {
    pub(crate) inner: Arc<Compiled>,
}

#[napi]
impl CompiledModule {
    #[napi(getter)]
    pub fn has_alloc(&self) -> bool {
        self.inner.alloc.is_some()
    }

    #[napi(getter)]
    pub fn initial_pages(&self) -> u32 {
        self.inner.initial_pages as u32
    }
}

#[napi(object)]
pub struct CompileRefusal {
    pub code: String,
    pub reason: String,
}

fn settle_compile(
    result: std::result::Result<Compiled, CompileError>,
) -> Result<Either<CompiledModule, CompileRefusal>> {
    match result {
        Ok(compiled) => Ok(Either::A(CompiledModule {
            inner: Arc::new(compiled),
        })),
        Err(CompileError::Refused(r)) => Ok(Either::B(CompileRefusal {
            code: r.code.to_owned(),
            reason: r.reason,
        })),
        Err(CompileError::Host(message)) => Err(Error::from_reason(message)),
    }
}

/// A panic must not unwind into libuv or V8 (that aborts the process); it becomes a
/// rejected promise / thrown error instead.
pub(crate) fn contain_panic<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::from_reason(format!(
            "internal sandbox error (panic): {detail}"
        )))
    })
}

/// Compiles on the calling thread; a refusal is returned, not thrown.
#[napi]
pub fn compile(bytes: Uint8Array) -> Result<Either<CompiledModule, CompileRefusal>> {
    contain_panic(|| settle_compile(compile_bytes(&bytes)))
}

pub struct CompileTask {
    bytes: Vec<u8>,
}

impl Task for CompileTask {
    type Output = std::result::Result<Compiled, CompileError>;
    type JsValue = Either<CompiledModule, CompileRefusal>;

    fn compute(&mut self) -> Result<Self::Output> {
        contain_panic(|| Ok(compile_bytes(&self.bytes)))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        settle_compile(output)
    }
}

/// Same as `compile`, on the libuv thread pool.
#[napi(ts_return_type = "Promise<CompiledModule | CompileRefusal>")]
pub fn compile_async(bytes: Uint8Array) -> AsyncTask<CompileTask> {
    AsyncTask::new(CompileTask {
        bytes: bytes.to_vec(),
    })
}

#[napi(object)]
pub struct SandboxCeilings {
    pub fuel: f64,
    pub max_memory_bytes: f64,
    pub guard_bytes: f64,
    pub max_stack_bytes: f64,
    pub max_output_bytes: f64,
    pub max_module_bytes: f64,
    pub pool_slots: f64,
}

/// Creates the engine (reserving the pool's address space) if needed; returns why it
/// cannot be created, or null when the sandbox is ready.
#[napi]
pub fn engine_error() -> Option<String> {
    crate::engine::engine().err()
}

/// The limits compiled into this addon, so the TS side can check it agrees.
#[napi]
pub fn ceilings() -> SandboxCeilings {
    SandboxCeilings {
        fuel: DEFAULT_FUEL as f64,
        max_memory_bytes: MAX_MEMORY_BYTES as f64,
        guard_bytes: GUARD_BYTES as f64,
        max_stack_bytes: MAX_STACK_BYTES as f64,
        max_output_bytes: MAX_OUTPUT_BYTES as f64,
        max_module_bytes: MAX_MODULE_BYTES as f64,
        pool_slots: POOL_SLOTS as f64,
    }
}
