//! JSON strings without copying: `Str` is the escaped text between the quotes and decodes to
//! UTF-8 bytes on the fly, for comparing, copying into a caller's buffer, or re-writing.

/// The body of a validated JSON string, escapes still in place.
#[derive(Clone, Copy)]
pub struct Str<'a> {
    raw: &'a [u8],
}

impl<'a> Str<'a> {
    pub(crate) fn from_raw(raw: &'a [u8]) -> Str<'a> {
        Str { raw }
    }

    /// The escaped text as it appears in the input.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The decoded UTF-8 bytes.
    pub fn bytes(&self) -> StrBytes<'a> {
        StrBytes { raw: self.raw, pos: 0, pending: [0; 4], pending_pos: 0, pending_len: 0 }
    }

    pub fn is_empty(&self) -> bool {
        // Every escape decodes to at least one byte.
        self.raw.is_empty()
    }

    /// Length of the decoded UTF-8 text in bytes.
    pub fn len(&self) -> usize {
        self.bytes().count()
    }

    pub fn eq_str(&self, text: &str) -> bool {
        if !self.raw.contains(&b'\\') {
            return self.raw == text.as_bytes();
        }
        self.bytes().eq(text.bytes())
    }

    pub fn same_text(&self, other: &Str<'_>) -> bool {
        self.bytes().eq(other.bytes())
    }

    /// Decodes into `buf`; None when it does not fit.
    pub fn copy_into<'b>(&self, buf: &'b mut [u8]) -> Option<&'b [u8]> {
        let mut len = 0;
        for byte in self.bytes() {
            *buf.get_mut(len)? = byte;
            len += 1;
        }
        Some(&buf[..len])
    }
}

/// Iterator over the decoded UTF-8 bytes of a `Str`.
pub struct StrBytes<'a> {
    raw: &'a [u8],
    pos: usize,
    pending: [u8; 4],
    pending_pos: u8,
    pending_len: u8,
}

impl<'a> StrBytes<'a> {
    fn hex4(&self, at: usize) -> u32 {
        self.raw[at..at + 4]
            .iter()
            .fold(0, |unit, &d| (unit << 4) | (d as char).to_digit(16).unwrap_or(0))
    }

    fn queue_utf8(&mut self, point: u32) -> u8 {
        let (len, first) = match point {
            0..=0x7f => (1, point as u8),
            0x80..=0x7ff => (2, 0xc0 | (point >> 6) as u8),
            0x800..=0xffff => (3, 0xe0 | (point >> 12) as u8),
            _ => (4, 0xf0 | (point >> 18) as u8),
        };
        for i in 1..len {
            let shift = 6 * (len - 1 - i);
            self.pending[i] = 0x80 | ((point >> shift) & 0x3f) as u8;
        }
        self.pending_pos = 1;
        self.pending_len = len as u8;
        first
    }
}

impl<'a> Iterator for StrBytes<'a> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if self.pending_pos < self.pending_len {
            let byte = self.pending[self.pending_pos as usize];
            self.pending_pos += 1;
            return Some(byte);
        }
        let c = *self.raw.get(self.pos)?;
        if c != b'\\' {
            self.pos += 1;
            return Some(c);
        }
        let escape = self.raw[self.pos + 1];
        self.pos += 2;
        let byte = match escape {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let mut point = self.hex4(self.pos);
                self.pos += 4;
                if (0xd800..=0xdbff).contains(&point) {
                    // validate::parse guarantees the low half follows as `\uXXXX`.
                    let low = self.hex4(self.pos + 2);
                    self.pos += 6;
                    point = 0x10000 + ((point - 0xd800) << 10) + (low - 0xdc00);
                }
                return Some(self.queue_utf8(point));
            }
            other => other,
        };
        Some(byte)
    }
}
