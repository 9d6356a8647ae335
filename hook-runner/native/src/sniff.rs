//! Classifies uploaded bytes before any parser sees them, so each wrong kind of upload
//! (empty, text, native code, component, random bytes) gets a reason saying what it is.

use crate::engine::MAX_MODULE_BYTES;
use crate::refusal::{refuse, Refusal};

/// Accepts only a core WebAssembly binary (magic `\0asm`, version 1) within the size cap.
pub fn sniff(bytes: &[u8]) -> Result<(), Refusal> {
    if bytes.is_empty() {
        return Err(refuse("empty_module", "module is empty (0 bytes)"));
    }
    if bytes.len() > MAX_MODULE_BYTES {
        return Err(refuse(
            "module_too_large",
            format!(
                "module is {} bytes; the limit is {MAX_MODULE_BYTES} bytes",
                bytes.len()
            ),
        ));
    }
    if bytes.starts_with(b"\x7fELF") {
        return Err(refuse(
            "precompiled_artifact",
            "precompiled native code (ELF, e.g. a wasmtime .cwasm) is not accepted; upload the .wasm binary",
        ));
    }
    if bytes.starts_with(b"\0asm") {
        return match bytes.get(4..8) {
            Some([1, 0, 0, 0]) => Ok(()),
            Some([_, _, 1, 0]) => Err(refuse(
                "component_model",
                "this is a WebAssembly component (component model); only core modules are accepted",
            )),
            Some(v) => Err(refuse(
                "invalid_module",
                format!("unsupported WebAssembly binary version {v:02x?}; expected core version 1"),
            )),
            None => Err(refuse("invalid_module", "truncated WebAssembly header")),
        };
    }
    if looks_like_wat(bytes) {
        return Err(refuse(
            "wasm_text",
            "WebAssembly text format (WAT) is not accepted; compile it to a binary .wasm first",
        ));
    }
    let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
    Err(refuse(
        "not_wasm",
        format!(
            "not a WebAssembly binary: missing the \\0asm magic (first bytes: {})",
            head.join(" ")
        ),
    ))
}

fn looks_like_wat(bytes: &[u8]) -> bool {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let trimmed = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &text[i..]);
    matches!(trimmed, Some(t) if t.starts_with(b"(") || t.starts_with(b";;"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(bytes: &[u8]) -> &'static str {
        sniff(bytes).map_or_else(|r| r.code, |()| "ok")
    }

    #[test]
    fn names_each_kind_of_upload() {
        assert_eq!(code(b""), "empty_module");
        assert_eq!(code(b"\0asm\x01\0\0\0"), "ok");
        assert_eq!(code(b"\0asm\x0d\0\x01\0"), "component_model");
        assert_eq!(code(b"\x7fELF\x02\x01"), "precompiled_artifact");
        assert_eq!(code(b"\xef\xbb\xbf  (module)"), "wasm_text");
        assert_eq!(code(b";; comment\n(module)"), "wasm_text");
        assert_eq!(code(b"MZ\x90\0"), "not_wasm");
        assert_eq!(code(b"\0asm\x02\0\0\0"), "invalid_module");
        assert_eq!(code(b"\0asm"), "invalid_module");
    }
}
