//! The message of a call that trapped: its phase, wasmtime's trap and the first backtrace frames by
//! name, built within the cap the runtime keeps (DESIGN: trap messages cut to 2,048 characters), so
//! names a module chose never cost more than that whatever their length.

use wasmtime::{Trap, WasmBacktrace};

/// Longest message, in bytes (so at most as many UTF-16 characters as the TS side's cap).
pub const MAX_MESSAGE_BYTES: usize = 2048;
/// Longest function name a frame shows, in bytes; mangled Rust and C++ names run to a few hundred.
pub const MAX_FRAME_NAME_BYTES: usize = 256;
/// Frames a message names; the engine captures no more than these (engine.rs).
pub const SHOWN_FRAMES: usize = 8;
const ELLIPSIS: &str = "…";

/// `<phase>: <trap> (at <innermost> <- <its caller> ...)`, at most MAX_MESSAGE_BYTES.
pub fn trap_message(phase: &str, trap: &Trap, backtrace: Option<&WasmBacktrace>) -> String {
    let mut message = format!("{phase}: {trap}");
    let frames = backtrace.map_or(&[][..], WasmBacktrace::frames);
    for (index, frame) in frames.iter().take(SHOWN_FRAMES).enumerate() {
        message.push_str(if index == 0 { " (at " } else { " <- " });
        match frame.func_name() {
            Some(name) => push_within(&mut message, name, MAX_FRAME_NAME_BYTES),
            None => message.push_str(&format!("func[{}]", frame.func_index())),
        }
        if message.len() > MAX_MESSAGE_BYTES {
            break;
        }
    }
    if !frames.is_empty() {
        message.push(')');
    }
    within(message, MAX_MESSAGE_BYTES)
}

/// Any other message of a failed call (an error that is not a trap), cut to MAX_MESSAGE_BYTES.
pub fn failure_message(message: String) -> String {
    within(message, MAX_MESSAGE_BYTES)
}

/// Appends `text`, or as much of it as fits in `max` bytes with an ellipsis, cut at a char boundary.
fn push_within(out: &mut String, text: &str, max: usize) {
    if text.len() <= max {
        out.push_str(text);
        return;
    }
    out.push_str(&text[..text.floor_char_boundary(max - ELLIPSIS.len())]);
    out.push_str(ELLIPSIS);
}

fn within(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut out = String::with_capacity(max);
    push_within(&mut out, &text, max);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_a_char_boundary_within_the_cap() {
        let text = "é".repeat(200);
        let mut out = String::new();
        push_within(&mut out, &text, 256);
        assert!(out.len() <= 256 && out.ends_with(ELLIPSIS));
        assert_eq!(within("ab".to_owned(), 2), "ab");
        assert_eq!(
            within("x".repeat(5000), MAX_MESSAGE_BYTES).len(),
            MAX_MESSAGE_BYTES
        );
    }
}
