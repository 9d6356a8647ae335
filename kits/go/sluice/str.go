// JSON strings without copying: Str is the escaped body of a validated string, decoded to
// UTF-8 on demand for comparing, copying or re-writing.
package sluice

// Str is the body of a validated JSON string, escapes still in place.
type Str struct{ raw []byte }

// Empty: every escape decodes to at least one byte, so the raw body decides.
func (s Str) Empty() bool { return len(s.raw) == 0 }

// Decode appends the decoded UTF-8 text to dst.
func (s Str) Decode(dst []byte) []byte {
	for i := 0; i < len(s.raw); {
		var chunk [4]byte
		var n int
		chunk, n, i = s.next(i)
		dst = append(dst, chunk[:n]...)
	}
	return dst
}

// Len is the decoded length in bytes.
func (s Str) Len() int {
	total := 0
	for i := 0; i < len(s.raw); {
		var n int
		_, n, i = s.next(i)
		total += n
	}
	return total
}

// Equal compares the decoded text with text.
func (s Str) Equal(text string) bool {
	at := 0
	for i := 0; i < len(s.raw); {
		var chunk [4]byte
		var n int
		chunk, n, i = s.next(i)
		if at+n > len(text) || string(chunk[:n]) != text[at:at+n] {
			return false
		}
		at += n
	}
	return at == len(text)
}

// SameText compares two decoded texts.
func (s Str) SameText(other Str) bool {
	return string(s.Decode(nil)) == string(other.Decode(nil))
}

// next decodes the character at raw[i:]: its UTF-8 bytes, their count, and the next index.
func (s Str) next(i int) ([4]byte, int, int) {
	var out [4]byte
	c := s.raw[i]
	if c != '\\' {
		out[0] = c
		return out, 1, i + 1
	}
	switch e := s.raw[i+1]; e {
	case 'b':
		out[0] = 0x08
	case 'f':
		out[0] = 0x0c
	case 'n':
		out[0] = '\n'
	case 'r':
		out[0] = '\r'
	case 't':
		out[0] = '\t'
	case 'u':
		point := hex4(s.raw, i+2)
		i += 6
		if point >= 0xd800 && point <= 0xdbff {
			low := hex4(s.raw, i+2) // Parse guaranteed the `\uDC00`-`\uDFFF` half
			i += 6
			point = 0x10000 + (point-0xd800)<<10 + (low - 0xdc00)
		}
		n := encodeUTF8(&out, point)
		return out, n, i
	default:
		out[0] = e
	}
	return out, 1, i + 2
}

func encodeUTF8(out *[4]byte, point int) int {
	switch {
	case point < 0x80:
		out[0] = byte(point)
		return 1
	case point < 0x800:
		out[0] = byte(0xc0 | point>>6)
		out[1] = byte(0x80 | point&0x3f)
		return 2
	case point < 0x10000:
		out[0] = byte(0xe0 | point>>12)
		out[1] = byte(0x80 | (point>>6)&0x3f)
		out[2] = byte(0x80 | point&0x3f)
		return 3
	}
	out[0] = byte(0xf0 | point>>18)
	out[1] = byte(0x80 | (point>>12)&0x3f)
	out[2] = byte(0x80 | (point>>6)&0x3f)
	out[3] = byte(0x80 | point&0x3f)
	return 4
}
