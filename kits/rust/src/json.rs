//! Zero-copy views over validated JSON: a `Value` is the exact byte range of one value and
//! every accessor walks it lazily, jumping over nested values through the parse's skip index.
//! Only `validate::parse` creates values from untrusted bytes.

use crate::Str;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// The skip index of one parsed document: `ends[i]` is the end offset (exclusive, from `base`)
/// of the string or container that starts at byte `i`; other slots are never read.
#[derive(Clone, Copy)]
pub(crate) struct Index<'a> {
    base: usize,
    ends: &'a [u32],
}

impl<'a> Index<'a> {
    pub(crate) fn new(base: usize, ends: &'a [u32]) -> Index<'a> {
        Index { base, ends }
    }
}

/// One validated JSON value (no surrounding whitespace).
#[derive(Clone, Copy)]
pub struct Value<'a> {
    raw: &'a [u8],
    index: Option<Index<'a>>,
}

impl<'a> Value<'a> {
    pub const NULL: Value<'static> = Value { raw: b"null", index: None };

    /// `raw` must be one complete value that `validate` accepted, `index` that parse's index.
    pub(crate) fn new(raw: &'a [u8], index: Option<Index<'a>>) -> Value<'a> {
        Value { raw, index }
    }

    fn child(&self, start: usize, end: usize) -> Value<'a> {
        Value { raw: &self.raw[start..end], index: self.index }
    }

    /// The index just past the value starting at `pos` inside this value.
    fn skip(&self, pos: usize) -> usize {
        let s = self.raw;
        if let (Some(index), b'"' | b'{' | b'[') = (self.index, s[pos]) {
            let offset = s.as_ptr() as usize - index.base;
            return index.ends[offset + pos] as usize - offset;
        }
        skip_value(s, pos)
    }

    /// The value's JSON text, byte for byte as in the input.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    pub fn kind(&self) -> Kind {
        match self.raw[0] {
            b'n' => Kind::Null,
            b't' | b'f' => Kind::Bool,
            b'"' => Kind::String,
            b'[' => Kind::Array,
            b'{' => Kind::Object,
            _ => Kind::Number,
        }
    }

    pub fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.raw[0] {
            b't' => Some(true),
            b'f' => Some(false),
            _ => None,
        }
    }

    /// True only for the literal `true`.
    pub fn is_true(&self) -> bool {
        self.as_bool() == Some(true)
    }

    pub fn as_str(&self) -> Option<Str<'a>> {
        if self.kind() == Kind::String {
            Some(Str::from_raw(&self.raw[1..self.raw.len() - 1]))
        } else {
            None
        }
    }

    /// An integer literal (no fraction, no exponent) that fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        if self.kind() != Kind::Number {
            return None;
        }
        let (negative, digits) = match self.raw.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, self.raw),
        };
        let mut magnitude: u64 = 0;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            magnitude = magnitude.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        let limit = if negative { 1u64 << 63 } else { i64::MAX as u64 };
        if magnitude > limit {
            return None;
        }
        // Two's complement: the magnitude 2^63 wraps to i64::MIN, as wanted.
        Some(if negative { (magnitude as i64).wrapping_neg() } else { magnitude as i64 })
    }

    /// The members of an object, in input order (empty for other kinds).
    pub fn members(&self) -> Members<'a> {
        let pos = if self.kind() == Kind::Object { 1 } else { self.raw.len() };
        Members { value: *self, pos }
    }

    /// The elements of an array (empty for other kinds).
    pub fn items(&self) -> Items<'a> {
        let pos = if self.kind() == Kind::Array { 1 } else { self.raw.len() };
        Items { value: *self, pos }
    }

    /// The object member `key` (the last one when a key repeats, as `JSON.parse` does).
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        let mut found = None;
        for (name, value) in self.members() {
            if name.eq_str(key) {
                found = Some(value);
            }
        }
        found
    }
}

/// Iterator over `(key, value)` of an object.
pub struct Members<'a> {
    value: Value<'a>,
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (Str<'a>, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.value.raw;
        let key_start = skip_whitespace(s, self.pos);
        if key_start >= s.len() || s[key_start] != b'"' {
            self.pos = s.len();
            return None;
        }
        let key_end = self.value.skip(key_start);
        let colon = skip_whitespace(s, key_end);
        let value_start = skip_whitespace(s, colon + 1);
        let value_end = self.value.skip(value_start);
        self.pos = skip_whitespace(s, value_end) + 1;
        let key = Str::from_raw(&s[key_start + 1..key_end - 1]);
        Some((key, self.value.child(value_start, value_end)))
    }
}

/// Iterator over the elements of an array.
pub struct Items<'a> {
    value: Value<'a>,
    pos: usize,
}

impl<'a> Iterator for Items<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.value.raw;
        let start = skip_whitespace(s, self.pos);
        if start >= s.len() || s[start] == b']' {
            self.pos = s.len();
            return None;
        }
        let end = self.value.skip(start);
        self.pos = skip_whitespace(s, end) + 1;
        Some(self.value.child(start, end))
    }
}

fn skip_whitespace(s: &[u8], mut pos: usize) -> usize {
    while pos < s.len() && matches!(s[pos], b' ' | b'\t' | b'\n' | b'\r') {
        pos += 1;
    }
    pos
}

/// The index just past the (validated) value starting at `pos`, by scanning: the fallback
/// when the document has no skip index.
fn skip_value(s: &[u8], mut pos: usize) -> usize {
    match s[pos] {
        b'"' => skip_string(s, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match s[pos] {
                    b'"' => {
                        pos = skip_string(s, pos);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return pos + 1;
                        }
                    }
                    _ => {}
                }
                pos += 1;
            }
        }
        _ => {
            while pos < s.len() && !matches!(s[pos], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                pos += 1;
            }
            pos
        }
    }
}

fn skip_string(s: &[u8], mut pos: usize) -> usize {
    pos += 1;
    loop {
        match s[pos] {
            b'\\' => pos += 2,
            b'"' => return pos + 1,
            _ => pos += 1,
        }
    }
}
