//! The output document writer: compact JSON (JSON.stringify's escaping) appended to a buffer in
//! the arena, NUL-terminated by `finish` as the guest ABI requires.

use core::arch::wasm32;

use crate::{arena, Str, Value};

/// The host reads at most this many bytes before the NUL (DESIGN 6.5).
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends JSON tokens; commas are inserted automatically. Methods chain:
/// `out.begin_object().key("score").i64(7).end_object()`. A document past MAX_OUTPUT_BYTES
/// traps (`unreachable`): the host could never read it.
pub struct Writer {
    start: usize,
    len: usize,
    capacity: usize,
    need_comma: bool,
}

impl Writer {
    pub(crate) fn new() -> Writer {
        let capacity = 1024;
        let start = arena::alloc(capacity).unwrap_or_else(|| wasm32::unreachable());
        Writer { start, len: 0, capacity, need_comma: false }
    }

    fn grow(&mut self, extra: usize) {
        let need = self.len + extra;
        if need > MAX_OUTPUT_BYTES + 1 {
            wasm32::unreachable();
        }
        let mut capacity = self.capacity * 2;
        while capacity < need {
            capacity *= 2;
        }
        // Never past the limit: every byte beyond it comes back here and traps.
        capacity = capacity.min(MAX_OUTPUT_BYTES + 1);
        if arena::top() == self.start + self.capacity {
            arena::extend_top(capacity - self.capacity).unwrap_or_else(|| wasm32::unreachable());
        } else {
            let moved = arena::alloc(capacity).unwrap_or_else(|| wasm32::unreachable());
            // Safety: both ranges lie in the arena and do not overlap (moved is newer).
            unsafe { core::ptr::copy_nonoverlapping(self.start as *const u8, moved as *mut u8, self.len) };
            self.start = moved;
        }
        self.capacity = capacity;
    }

    fn byte(&mut self, byte: u8) {
        if self.len == self.capacity {
            self.grow(1);
        }
        // Safety: [start, start + capacity) is ours, reserved in the arena.
        unsafe { *((self.start + self.len) as *mut u8) = byte };
        self.len += 1;
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn before_value(&mut self) {
        if self.need_comma {
            self.byte(b',');
        }
        self.need_comma = true;
    }

    pub fn begin_object(&mut self) -> &mut Self {
        self.before_value();
        self.byte(b'{');
        self.need_comma = false;
        self
    }

    pub fn end_object(&mut self) -> &mut Self {
        self.byte(b'}');
        self.need_comma = true;
        self
    }

    pub fn begin_array(&mut self) -> &mut Self {
        self.before_value();
        self.byte(b'[');
        self.need_comma = false;
        self
    }

    pub fn end_array(&mut self) -> &mut Self {
        self.byte(b']');
        self.need_comma = true;
        self
    }

    /// An object key; the next call writes its value.
    pub fn key(&mut self, key: &str) -> &mut Self {
        self.str(key);
        self.byte(b':');
        self.need_comma = false;
        self
    }

    pub fn null(&mut self) -> &mut Self {
        self.before_value();
        self.bytes(b"null");
        self
    }

    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.before_value();
        self.bytes(if value { b"true" } else { b"false" });
        self
    }

    pub fn i64(&mut self, value: i64) -> &mut Self {
        self.before_value();
        self.decimal(value);
        self
    }

    pub fn str(&mut self, text: &str) -> &mut Self {
        self.begin_string().string_part(text).end_string()
    }

    /// Re-writes a string from the input (decoded, then escaped the canonical way).
    pub fn str_json(&mut self, text: Str<'_>) -> &mut Self {
        self.begin_string().string_part_json(text).end_string()
    }

    /// Copies a validated input value verbatim (including any whitespace inside it).
    pub fn raw(&mut self, value: Value<'_>) -> &mut Self {
        self.before_value();
        self.bytes(value.raw());
        self
    }

    /// Starts a string built from parts; finish it with `end_string`.
    pub fn begin_string(&mut self) -> &mut Self {
        self.before_value();
        self.byte(b'"');
        self
    }

    pub fn string_part(&mut self, text: &str) -> &mut Self {
        for b in text.bytes() {
            self.escaped(b);
        }
        self
    }

    pub fn string_part_json(&mut self, text: Str<'_>) -> &mut Self {
        for b in text.bytes() {
            self.escaped(b);
        }
        self
    }

    pub fn string_part_i64(&mut self, value: i64) -> &mut Self {
        self.decimal(value);
        self
    }

    pub fn end_string(&mut self) -> &mut Self {
        self.byte(b'"');
        self
    }

    fn decimal(&mut self, value: i64) {
        if value < 0 {
            self.byte(b'-');
        }
        let mut magnitude = value.unsigned_abs();
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (magnitude % 10) as u8;
            magnitude /= 10;
            if magnitude == 0 {
                break;
            }
        }
        self.bytes(&digits[at..]);
    }

    /// One byte of UTF-8 text inside a string. Multi-byte sequences never contain bytes
    /// below 0x80, so escaping byte by byte is exact.
    fn escaped(&mut self, b: u8) {
        match b {
            b'"' => self.bytes(b"\\\""),
            b'\\' => self.bytes(b"\\\\"),
            0x08 => self.bytes(b"\\b"),
            b'\t' => self.bytes(b"\\t"),
            b'\n' => self.bytes(b"\\n"),
            0x0c => self.bytes(b"\\f"),
            b'\r' => self.bytes(b"\\r"),
            0x00..=0x1f => self.bytes(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]),
            _ => self.byte(b),
        }
    }

    /// NUL-terminates the document and returns its address.
    pub(crate) fn finish(mut self) -> usize {
        self.byte(0);
        self.start
    }
}
