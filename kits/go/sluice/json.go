// Package sluice is the Sluice action kit for TinyGo (UNVERIFIED: see ../README.md). This file
// owns the zero-copy Value views over validated bytes and their skip index.
package sluice

// MaxDepth: arrays and objects nested deeper are refused. The envelope itself is level 1, so a
// payload of 128 levels, the deepest Sluice stores (a webhook body is the payload), reaches 129.
const MaxDepth = 129

type Kind int

const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// MaxIndexedBytes: larger documents get no skip index (it takes 4 bytes per input byte from
// TinyGo's heap, where running out traps); their accessors scan instead.
const MaxIndexedBytes = 1 << 20

// index is the skip index of one parsed document: ends[i] is the end offset (exclusive) of the
// string or container that starts at byte i; other slots are never read.
type index struct {
	ends []uint32
	// capacity of the parsed input: a value's offset is capacity - cap(value.raw), since every
	// value is a subslice running to the end of the input's backing array.
	capacity int
}

// Value is one validated JSON value: its exact bytes (no surrounding whitespace) and its
// document's skip index (nil: accessors scan).
type Value struct {
	raw []byte
	ix  *index
}

func nullValue() Value { return Value{raw: []byte("null")} }

// Parse validates input as exactly one JSON document (RFC 8259, MaxDepth, no lone surrogate
// escapes) and returns it.
func Parse(input []byte) (Value, bool) {
	v := validator{s: input}
	var ix *index
	if len(input) <= MaxIndexedBytes {
		ix = &index{ends: make([]uint32, len(input)), capacity: cap(input)}
		v.ends = ix.ends
	}
	v.whitespace()
	start := v.pos
	if !v.value(1) {
		return Value{}, false
	}
	end := v.pos
	v.whitespace()
	if v.pos != len(input) {
		return Value{}, false
	}
	return Value{raw: input[start:end], ix: ix}, true
}

func (v Value) child(start, end int) Value { return Value{raw: v.raw[start:end], ix: v.ix} }

// skip returns the index just past the value starting at raw[pos].
func (v Value) skip(pos int) int {
	if c := v.raw[pos]; v.ix != nil && (c == '"' || c == '{' || c == '[') {
		offset := v.ix.capacity - cap(v.raw)
		return int(v.ix.ends[offset+pos]) - offset
	}
	return skipValue(v.raw, pos)
}

// Raw is the value's JSON text, byte for byte as in the input.
func (v Value) Raw() []byte { return v.raw }

func (v Value) Kind() Kind {
	switch v.raw[0] {
	case 'n':
		return Null
	case 't', 'f':
		return Bool
	case '"':
		return String
	case '[':
		return Array
	case '{':
		return Object
	}
	return Number
}

// IsTrue is true only for the literal `true`.
func (v Value) IsTrue() bool { return v.raw[0] == 't' }

// Str returns the string body (escapes still in place).
func (v Value) Str() (Str, bool) {
	if v.Kind() != String {
		return Str{}, false
	}
	return Str{raw: v.raw[1 : len(v.raw)-1]}, true
}

// Int64 accepts an integer literal (no fraction, no exponent) that fits in an int64.
func (v Value) Int64() (int64, bool) {
	if v.Kind() != Number {
		return 0, false
	}
	digits, negative := v.raw, false
	if digits[0] == '-' {
		digits, negative = digits[1:], true
	}
	var magnitude uint64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, false
		}
		digit := uint64(d - '0')
		if magnitude > (^uint64(0)-digit)/10 {
			return 0, false
		}
		magnitude = magnitude*10 + digit
	}
	limit := uint64(1<<63 - 1)
	if negative {
		limit = 1 << 63
	}
	if magnitude > limit {
		return 0, false
	}
	if negative {
		return int64(-magnitude), true // two's complement: 2^63 wraps to math.MinInt64
	}
	return int64(magnitude), true
}

// Each calls fn for every array element (nothing for other kinds); fn returns false to stop.
func (v Value) Each(fn func(item Value) bool) {
	if v.Kind() != Array {
		return
	}
	s := v.raw
	for pos := 1; ; {
		start := skipWhitespace(s, pos)
		if start >= len(s) || s[start] == ']' {
			return
		}
		end := v.skip(start)
		if !fn(v.child(start, end)) {
			return
		}
		pos = skipWhitespace(s, end) + 1
	}
}

// Members calls fn for every object member in input order; fn returns false to stop.
func (v Value) Members(fn func(key Str, value Value) bool) {
	if v.Kind() != Object {
		return
	}
	s := v.raw
	for pos := 1; ; {
		keyStart := skipWhitespace(s, pos)
		if keyStart >= len(s) || s[keyStart] != '"' {
			return
		}
		keyEnd := v.skip(keyStart)
		valueStart := skipWhitespace(s, skipWhitespace(s, keyEnd)+1)
		valueEnd := v.skip(valueStart)
		if !fn(Str{raw: s[keyStart+1 : keyEnd-1]}, v.child(valueStart, valueEnd)) {
			return
		}
		pos = skipWhitespace(s, valueEnd) + 1
	}
}

// Get returns the object member key (the last one when a key repeats, as JSON.parse does).
func (v Value) Get(key string) (Value, bool) {
	var found Value
	ok := false
	v.Members(func(name Str, value Value) bool {
		if name.Equal(key) {
			found, ok = value, true
		}
		return true
	})
	return found, ok
}

func skipWhitespace(s []byte, pos int) int {
	for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r') {
		pos++
	}
	return pos
}

// skipValue returns the index just past the validated value starting at pos, by scanning: the
// fallback when the document has no skip index.
func skipValue(s []byte, pos int) int {
	switch s[pos] {
	case '"':
		return skipString(s, pos)
	case '{', '[':
		depth := 0
		for {
			switch s[pos] {
			case '"':
				pos = skipString(s, pos)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return pos + 1
				}
			}
			pos++
		}
	}
	for pos < len(s) {
		switch s[pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return pos
		}
		pos++
	}
	return pos
}

func skipString(s []byte, pos int) int {
	for pos++; ; {
		switch s[pos] {
		case '\\':
			pos += 2
		case '"':
			return pos + 1
		default:
			pos++
		}
	}
}
