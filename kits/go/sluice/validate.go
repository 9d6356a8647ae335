// The strict RFC 8259 validator behind Parse: one pass over the whole input that also fills
// the skip index, so the Value accessors jump over values without re-checking the grammar.
package sluice

type validator struct {
	s    []byte
	pos  int
	ends []uint32 // the skip index being filled, or nil
}

func (v *validator) record(start int) {
	if v.ends != nil {
		v.ends[start] = uint32(v.pos)
	}
}

func (v *validator) peek() int {
	if v.pos < len(v.s) {
		return int(v.s[v.pos])
	}
	return -1
}

func (v *validator) whitespace() {
	for v.pos < len(v.s) {
		switch v.s[v.pos] {
		case ' ', '\t', '\n', '\r':
			v.pos++
		default:
			return
		}
	}
}

func (v *validator) value(depth int) bool {
	switch c := v.peek(); {
	case c == '{':
		return v.container(depth, '}', true)
	case c == '[':
		return v.container(depth, ']', false)
	case c == '"':
		return v.str()
	case c == 't':
		return v.word("true")
	case c == 'f':
		return v.word("false")
	case c == 'n':
		return v.word("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number()
	}
	return false
}

func (v *validator) word(w string) bool {
	if len(v.s)-v.pos < len(w) || string(v.s[v.pos:v.pos+len(w)]) != w {
		return false
	}
	v.pos += len(w)
	return true
}

func (v *validator) container(depth int, closer byte, object bool) bool {
	if depth > MaxDepth {
		return false
	}
	start := v.pos
	v.pos++
	v.whitespace()
	if v.peek() == int(closer) {
		v.pos++
		v.record(start)
		return true
	}
	for {
		if object {
			if v.peek() != '"' || !v.str() {
				return false
			}
			v.whitespace()
			if v.peek() != ':' {
				return false
			}
			v.pos++
			v.whitespace()
		}
		if !v.value(depth + 1) {
			return false
		}
		v.whitespace()
		next := v.peek()
		v.pos++
		if next == int(closer) {
			v.record(start)
			return true
		}
		if next != ',' {
			return false
		}
		v.whitespace()
	}
}

func (v *validator) digits() int {
	start := v.pos
	for v.pos < len(v.s) && v.s[v.pos] >= '0' && v.s[v.pos] <= '9' {
		v.pos++
	}
	return v.pos - start
}

func (v *validator) number() bool {
	if v.peek() == '-' {
		v.pos++
	}
	if v.peek() == '0' {
		v.pos++
	} else if v.digits() == 0 {
		return false
	}
	if v.peek() == '.' {
		v.pos++
		if v.digits() == 0 {
			return false
		}
	}
	if e := v.peek(); e == 'e' || e == 'E' {
		v.pos++
		if sign := v.peek(); sign == '+' || sign == '-' {
			v.pos++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}

func hexValue(d byte) int {
	switch {
	case d >= '0' && d <= '9':
		return int(d - '0')
	case d >= 'a' && d <= 'f':
		return int(d-'a') + 10
	case d >= 'A' && d <= 'F':
		return int(d-'A') + 10
	}
	return -1
}

// hex4 reads four hex digits at s[at:] as a code unit, or -1.
func hex4(s []byte, at int) int {
	if len(s)-at < 4 {
		return -1
	}
	unit := 0
	for _, d := range s[at : at+4] {
		h := hexValue(d)
		if h < 0 {
			return -1
		}
		unit = unit<<4 | h
	}
	return unit
}

func (v *validator) str() bool {
	start := v.pos
	v.pos++
	for {
		if v.pos >= len(v.s) {
			return false
		}
		c := v.s[v.pos]
		v.pos++
		switch {
		case c == '"':
			v.record(start)
			return true
		case c < 0x20:
			return false
		case c != '\\':
			continue
		}
		if v.pos >= len(v.s) {
			return false
		}
		e := v.s[v.pos]
		v.pos++
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			continue
		case 'u':
		default:
			return false
		}
		unit := hex4(v.s, v.pos)
		v.pos += 4
		if unit < 0 || (unit >= 0xdc00 && unit <= 0xdfff) {
			return false
		}
		if unit >= 0xd800 && unit <= 0xdbff {
			if len(v.s)-v.pos < 6 || v.s[v.pos] != '\\' || v.s[v.pos+1] != 'u' {
				return false
			}
			low := hex4(v.s, v.pos+2)
			if low < 0xdc00 || low > 0xdfff {
				return false
			}
			v.pos += 6
		}
	}
}
