//! The guest ABI glue behind `sluice_action!`: input placement and the `execute` contract
//! (DESIGN 6.5). Public only so the macro can reach it; call it through the macro.

use core::arch::wasm32;

use crate::{arena, parse, Envelope, Reject, Writer};

/// `alloc(len)`: a buffer for the host's input. Traps when memory is exhausted.
pub fn alloc(len: i32) -> i32 {
    if len < 0 {
        wasm32::unreachable();
    }
    match arena::alloc(len as usize) {
        Some(ptr) => ptr as i32,
        None => wasm32::unreachable(),
    }
}

/// `execute(ptr, len)`: 0 when the input is not a JSON object or the handler rejects,
/// otherwise the address of the NUL-terminated output document.
pub fn execute<F>(ptr: i32, len: i32, handler: F) -> i32
where
    F: FnOnce(&Envelope<'_>, &mut Writer) -> Result<(), Reject>,
{
    if len < 0 {
        return 0;
    }
    // Safety: the host wrote `len` bytes at `ptr` (into our own `alloc` buffer) and nothing
    // else touches them during the call.
    let input = unsafe { core::slice::from_raw_parts(ptr as usize as *const u8, len as usize) };
    let envelope = match parse(input).and_then(Envelope::from_root) {
        Some(envelope) => envelope,
        None => return 0,
    };
    let mut out = Writer::new();
    match handler(&envelope, &mut out) {
        Ok(()) => out.finish() as i32,
        Err(Reject) => 0,
    }
}
