//! Node-API surface for running an admitted module: clamped limits in, one `RunOutcome`
//! out, either on the libuv thread pool (`run`) or on the calling thread (`runInline`).

use std::sync::Arc;

use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Error, Result, Task};
use napi_derive::napi;

use crate::engine::{DEFAULT_FUEL, MAX_MEMORY_BYTES, MAX_OUTPUT_BYTES};
use crate::invoke::{invoke, CallLimits, Outcome};
use crate::validate::Compiled;
use crate::{contain_panic, CompiledModule};

#[napi(object)]
pub struct RunLimits {
    pub fuel: Option<f64>,
    pub max_memory_bytes: Option<f64>,
    pub max_output_bytes: Option<f64>,
}

#[napi(object)]
pub struct RunOutcome {
    /// `output` | `rejected` | `trap`
    pub kind: String,
    pub output: Option<String>,
    pub trap: Option<String>,
    pub message: Option<String>,
    pub fuel_used: f64,
}

/// Lowers a requested limit to at most `ceiling`; a missing or non-numeric value means
/// the ceiling itself.
fn clamp(requested: Option<f64>, ceiling: u64) -> u64 {
    match requested {
        Some(v) if v.is_finite() => (v.max(0.0).floor() as u64).min(ceiling),
        _ => ceiling,
    }
}

/// The one place JS limits become `CallLimits`, so both paths enforce the same ceilings.
fn call_limits(limits: Option<RunLimits>) -> CallLimits {
    let requested = limits.unwrap_or(RunLimits {
        fuel: None,
        max_memory_bytes: None,
        max_output_bytes: None,
    });
    CallLimits {
        fuel: clamp(requested.fuel, DEFAULT_FUEL),
        max_memory_bytes: clamp(requested.max_memory_bytes, MAX_MEMORY_BYTES as u64) as usize,
        max_output_bytes: clamp(requested.max_output_bytes, MAX_OUTPUT_BYTES as u64) as usize,
    }
}

/// One guest run with panics contained; a host failure becomes an error, never a trap.
fn run_contained(module: &Compiled, input: &str, limits: CallLimits) -> Result<Outcome> {
    contain_panic(|| invoke(module, input.as_bytes(), limits).map_err(|e| Error::from_reason(e.0)))
}

impl From<Outcome> for RunOutcome {
    fn from(outcome: Outcome) -> RunOutcome {
        let (kind, output, trap, message, fuel_used) = match outcome {
            Outcome::Output { output, fuel_used } => {
                ("output", Some(output), None, None, fuel_used)
            }
            Outcome::Rejected { fuel_used } => ("rejected", None, None, None, fuel_used),
            Outcome::Trap {
                trap,
                message,
                fuel_used,
            } => (
                "trap",
                None,
                Some(trap.to_owned()),
                Some(message),
                fuel_used,
            ),
        };
        RunOutcome {
            kind: kind.into(),
            output,
            trap,
            message,
            fuel_used: fuel_used as f64,
        }
    }
}

pub struct RunTask {
    module: Arc<Compiled>,
    input: String,
    limits: CallLimits,
}

impl Task for RunTask {
    type Output = Outcome;
    type JsValue = RunOutcome;

    fn compute(&mut self) -> Result<Self::Output> {
        run_contained(&self.module, &self.input, self.limits)
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output.into())
    }
}

/// Runs `execute` in a fresh store on the libuv thread pool. Guest misbehaviour resolves
/// as a `trap` outcome; the promise rejects only on host failure (e.g. pool exhausted).
#[napi(ts_return_type = "Promise<RunOutcome>")]
pub fn run(
    module: &CompiledModule,
    input: String,
    limits: Option<RunLimits>,
) -> AsyncTask<RunTask> {
    AsyncTask::new(RunTask {
        module: Arc::clone(&module.inner),
        input,
        limits: call_limits(limits),
    })
}

/// The same run on the calling thread (the JS event loop), which it blocks until the guest
/// returns, traps or runs out of fuel: the caller bounds that time with a small fuel limit.
/// Host failure throws; guest misbehaviour returns a `trap` outcome.
#[napi]
pub fn run_inline(
    module: &CompiledModule,
    input: String,
    limits: Option<RunLimits>,
) -> Result<RunOutcome> {
    run_contained(&module.inner, &input, call_limits(limits)).map(RunOutcome::from)
}
