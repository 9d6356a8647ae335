//! The bump arena over the guest's linear memory, from the linker's `__heap_base` upward.
//! Nothing is ever freed: the host runs every invocation on a fresh instance.

use core::arch::wasm32;

const PAGE_BYTES: usize = 65536;

extern "C" {
    // Defined by wasm-ld (rust-lld): the first byte after static data and the stack.
    static __heap_base: u8;
}

static mut TOP: usize = 0;

/// The first free byte.
pub fn top() -> usize {
    unsafe {
        if TOP == 0 {
            TOP = (&__heap_base as *const u8 as usize + 7) & !7;
        }
        TOP
    }
}

/// Reserves `len` bytes at the top, 8-byte aligned, growing memory as needed; None when
/// memory is exhausted.
pub fn alloc(len: usize) -> Option<usize> {
    let start = top().checked_add(7)? & !7;
    let end = start.checked_add(len)?;
    ensure_memory(end)?;
    unsafe { TOP = end };
    Some(start)
}

/// Grows the newest block (the one ending at `top()`) by `extra` bytes, in place.
pub fn extend_top(extra: usize) -> Option<()> {
    let end = top().checked_add(extra)?;
    ensure_memory(end)?;
    unsafe { TOP = end };
    Some(())
}

fn ensure_memory(end: usize) -> Option<()> {
    let have = wasm32::memory_size(0) * PAGE_BYTES;
    if end <= have {
        return Some(());
    }
    let pages = (end - have + PAGE_BYTES - 1) / PAGE_BYTES;
    if wasm32::memory_grow(0, pages) == usize::MAX {
        None
    } else {
        Some(())
    }
}
