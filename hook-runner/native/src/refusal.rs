//! Why a module was refused at compile time: a stable snake_case code (mirrored by
//! `CompileRefusalCode` in hook-runner/sandbox.ts) and a sentence for humans.

#[derive(Debug)]
pub struct Refusal {
    pub code: &'static str,
    pub reason: String,
}

pub fn refuse(code: &'static str, reason: impl Into<String>) -> Refusal {
    Refusal {
        code,
        reason: reason.into(),
    }
}
