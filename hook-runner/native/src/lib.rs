//! Node-API surface of the Sluice sandbox addon (napi-rs): compile untrusted core wasm
//! into a handle (here, or in a compile process that hands back an artifact to load), report
//! limits; running it lives in run.rs. Wrapped by sandbox.ts.

mod abi;
mod engine;
mod invoke;
mod names;
mod refusal;
mod run;
mod scan;
mod sniff;
mod trap_message;
mod validate;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use napi::bindgen_prelude::{AsyncTask, Buffer, Either, Uint8Array};
use napi::{Env, Error, Result, Task};
use napi_derive::napi;

use crate::engine::{
    DEFAULT_FUEL, GUARD_BYTES, MAX_MEMORY_BYTES, MAX_MODULE_BYTES, MAX_OUTPUT_BYTES,
    MAX_STACK_BYTES, POOL_SLOTS,
};
use crate::names::{LongNames, MAX_NAME_BYTES};
use crate::validate::{
    compile as compile_bytes, compile_artifact, load_artifact, Artifact, CompileError, Compiled,
};

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

/// A compile's result for JS: the value, a refusal (returned, not thrown), or a host error.
fn settle<T, J>(
    result: std::result::Result<T, CompileError>,
    value: impl FnOnce(T) -> J,
) -> Result<Either<J, CompileRefusal>> {
    match result {
        Ok(done) => Ok(Either::A(value(done))),
        Err(CompileError::Refused(r)) => Ok(Either::B(CompileRefusal {
            code: r.code.to_owned(),
            reason: r.reason,
        })),
        Err(CompileError::Host(message)) => Err(Error::from_reason(message)),
    }
}

fn handle(compiled: Compiled) -> CompiledModule {
    CompiledModule {
        inner: Arc::new(compiled),
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

/// What a `name` section past the caps does (names.rs): `stored` bytes were admitted before (a
/// compile again from the store, or a restore), so theirs is left out; an upload's refuses it.
fn long_names(stored: Option<bool>) -> LongNames {
    if stored == Some(true) {
        LongNames::Drop
    } else {
        LongNames::Refuse
    }
}

/// Compiles on the calling thread; a refusal is returned, not thrown.
#[napi]
pub fn compile(
    bytes: Uint8Array,
    stored: Option<bool>,
) -> Result<Either<CompiledModule, CompileRefusal>> {
    contain_panic(|| settle(compile_bytes(&bytes, long_names(stored)), handle))
}

/// Compiled code in wasmtime's serialized form, for `loadArtifactAsync` in the process that
/// started the compiling one.
#[napi(object)]
pub struct CompiledArtifact {
    pub code: Buffer,
    pub has_start: bool,
}

pub struct CompileArtifactTask {
    bytes: Vec<u8>,
    long_names: LongNames,
}

impl Task for CompileArtifactTask {
    type Output = std::result::Result<Artifact, CompileError>;
    type JsValue = Either<CompiledArtifact, CompileRefusal>;

    fn compute(&mut self) -> Result<Self::Output> {
        contain_panic(|| Ok(compile_artifact(&self.bytes, self.long_names)))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        settle(output, |artifact| CompiledArtifact {
            code: artifact.code.into(),
            has_start: artifact.has_start,
        })
    }
}

/// Admits and compiles `bytes` on the libuv thread pool, as `compile` does, into an artifact
/// (used by the hook-runner's compile process, which its runner can kill at a deadline);
/// `stored` as for `compile`.
#[napi(ts_return_type = "Promise<CompiledArtifact | CompileRefusal>")]
pub fn compile_artifact_async(
    bytes: Uint8Array,
    stored: Option<bool>,
) -> AsyncTask<CompileArtifactTask> {
    AsyncTask::new(CompileArtifactTask {
        bytes: bytes.to_vec(),
        long_names: long_names(stored),
    })
}

pub struct LoadArtifactTask {
    code: Vec<u8>,
    has_start: bool,
}

impl Task for LoadArtifactTask {
    type Output = std::result::Result<Compiled, CompileError>;
    type JsValue = Either<CompiledModule, CompileRefusal>;

    fn compute(&mut self) -> Result<Self::Output> {
        // SAFETY: see load_artifact; sandbox.ts accepts artifacts only from compile-process.ts,
        // which takes them from the compile process it started, over that process's IPC pipe.
        contain_panic(|| Ok(unsafe { load_artifact(&self.code, self.has_start) }))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        settle(output, handle)
    }
}

/// Loads what `compileArtifactAsync` made in this runner's own compile process, on the libuv
/// thread pool. Never give it bytes from anywhere else: its machine code runs as it is.
#[napi(ts_return_type = "Promise<CompiledModule | CompileRefusal>")]
pub fn load_artifact_async(code: Uint8Array, has_start: bool) -> AsyncTask<LoadArtifactTask> {
    AsyncTask::new(LoadArtifactTask {
        code: code.to_vec(),
        has_start,
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
    pub max_name_bytes: f64,
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
        max_name_bytes: MAX_NAME_BYTES as f64,
    }
}
