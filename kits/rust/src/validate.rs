//! The strict RFC 8259 validator: one pass over the whole input before any accessor runs. It
//! also fills the skip index (end offset of every string and container), so the lazy accessors
//! in `json` jump over a value in O(1) instead of rescanning it.

use crate::json::Index;
use crate::Value;

/// Arrays and objects nested deeper than this are refused. The envelope itself is level 1, so a
/// payload of 128 levels, the deepest Sluice stores (a webhook body is the payload), reaches 129.
pub const MAX_DEPTH: usize = 129;

/// Validates `input` as exactly one JSON document and returns it; None when it is not JSON,
/// nests deeper than MAX_DEPTH, or holds a lone UTF-16 surrogate escape. The skip index takes
/// 4 bytes per input byte from the arena; without room for it the accessors scan instead.
pub fn parse(input: &[u8]) -> Option<Value<'_>> {
    let ends = index_memory(input.len());
    let mut v = Validator { s: input, pos: 0, ends: ends.unwrap_or(core::ptr::null_mut()) };
    v.whitespace();
    let start = v.pos;
    v.value(1)?;
    let end = v.pos;
    v.whitespace();
    if v.pos != input.len() {
        return None;
    }
    // Safety: `ends` is our own arena block of input.len() slots, no longer written. Only
    // the slots at token starts are ever read, and the validator wrote each of those.
    let index = ends.map(|ends| Index::new(input.as_ptr() as usize, unsafe { core::slice::from_raw_parts(ends, input.len()) }));
    Some(Value::new(&input[start..end], index))
}

/// One u32 slot per input byte, fresh from the arena (never handed out again).
#[cfg(target_arch = "wasm32")]
fn index_memory(len: usize) -> Option<*mut u32> {
    let ptr = crate::arena::alloc(len.checked_mul(4)?)?;
    Some(ptr as *mut u32)
}

#[cfg(not(target_arch = "wasm32"))]
fn index_memory(_len: usize) -> Option<*mut u32> {
    None
}

struct Validator<'a> {
    s: &'a [u8],
    pos: usize,
    ends: *mut u32,
}

impl<'a> Validator<'a> {
    fn record(&mut self, start: usize) {
        if !self.ends.is_null() {
            // Safety: `ends` has one slot per input byte and start < s.len().
            unsafe { *self.ends.add(start) = self.pos as u32 };
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.container(depth, true),
            b'[' => self.container(depth, false),
            b'"' => self.string(),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        if self.s.get(self.pos..self.pos + word.len())? != word {
            return None;
        }
        self.pos += word.len();
        Some(())
    }

    fn container(&mut self, depth: usize, object: bool) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        let close = if object { b'}' } else { b']' };
        self.pos += 1;
        self.whitespace();
        if self.eat(close).is_none() {
            loop {
                if object {
                    if self.peek()? != b'"' {
                        return None;
                    }
                    self.string()?;
                    self.whitespace();
                    self.eat(b':')?;
                    self.whitespace();
                }
                self.value(depth + 1)?;
                self.whitespace();
                let next = self.peek()?;
                self.pos += 1;
                if next == close {
                    break;
                }
                if next != b',' {
                    return None;
                }
                self.whitespace();
            }
        }
        self.record(start);
        Some(())
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        if self.eat(b'0').is_none() && self.digits() == 0 {
            return None;
        }
        if self.eat(b'.').is_some() && self.digits() == 0 {
            return None;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.s.get(self.pos..self.pos + 4)?;
        let mut unit = 0u32;
        for &d in digits {
            unit = (unit << 4) | (d as char).to_digit(16)?;
        }
        self.pos += 4;
        Some(unit)
    }

    fn string(&mut self) -> Option<()> {
        let start = self.pos;
        let s = self.s;
        let mut pos = start + 1;
        loop {
            // The hot loop of the whole kit: plain bytes cost one load and three compares.
            let c = *s.get(pos)?;
            pos += 1;
            if c == b'"' {
                break;
            }
            if c == b'\\' {
                self.pos = pos;
                self.escape()?;
                pos = self.pos;
            } else if c < 0x20 {
                return None;
            }
        }
        self.pos = pos;
        self.record(start);
        Some(())
    }

    /// The escape after a backslash (at self.pos).
    fn escape(&mut self) -> Option<()> {
        let e = self.peek()?;
        self.pos += 1;
        match e {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(()),
            b'u' => {
                let unit = self.hex4()?;
                if (0xdc00..=0xdfff).contains(&unit) {
                    return None;
                }
                if (0xd800..=0xdbff).contains(&unit) {
                    self.eat(b'\\')?;
                    self.eat(b'u')?;
                    if !(0xdc00..=0xdfff).contains(&self.hex4()?) {
                        return None;
                    }
                }
                Some(())
            }
            _ => None,
        }
    }
}
