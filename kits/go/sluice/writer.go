// The output document writer: compact JSON with JSON.stringify's escaping. Commas are
// inserted automatically; methods chain: out.BeginObject().Key("score").Int(7).EndObject().
package sluice

// MaxOutputBytes: the host reads at most this many bytes before the NUL (DESIGN 6.5).
const MaxOutputBytes = 256 * 1024

const hexDigits = "0123456789abcdef"

type Writer struct {
	buf       []byte
	needComma bool
}

// checked panics (a trap under -panic=trap) once the document is past MaxOutputBytes, as the
// other kits' writers trap: a handler that wrote too much and then rejects still traps.
func (w *Writer) checked() *Writer {
	if len(w.buf) > MaxOutputBytes {
		panic("sluice: output document larger than 256 KB")
	}
	return w
}

func (w *Writer) beforeValue() {
	if w.needComma {
		w.buf = append(w.buf, ',')
	}
	w.needComma = true
}

func (w *Writer) BeginObject() *Writer {
	w.beforeValue()
	w.buf = append(w.buf, '{')
	w.needComma = false
	return w.checked()
}

func (w *Writer) EndObject() *Writer {
	w.buf = append(w.buf, '}')
	w.needComma = true
	return w.checked()
}

func (w *Writer) BeginArray() *Writer {
	w.beforeValue()
	w.buf = append(w.buf, '[')
	w.needComma = false
	return w.checked()
}

func (w *Writer) EndArray() *Writer {
	w.buf = append(w.buf, ']')
	w.needComma = true
	return w.checked()
}

// Key writes an object key; the next call writes its value.
func (w *Writer) Key(key string) *Writer {
	w.String(key)
	w.buf = append(w.buf, ':')
	w.needComma = false
	return w.checked()
}

func (w *Writer) Null() *Writer {
	w.beforeValue()
	w.buf = append(w.buf, "null"...)
	return w.checked()
}

func (w *Writer) Bool(value bool) *Writer {
	w.beforeValue()
	if value {
		w.buf = append(w.buf, "true"...)
	} else {
		w.buf = append(w.buf, "false"...)
	}
	return w.checked()
}

func (w *Writer) Int(value int64) *Writer {
	w.beforeValue()
	w.buf = appendDecimal(w.buf, value)
	return w.checked()
}

func (w *Writer) String(text string) *Writer {
	return w.BeginString().StringPart(text).EndString()
}

// StringJSON re-writes a string from the input (decoded, then escaped the canonical way).
func (w *Writer) StringJSON(text Str) *Writer {
	return w.BeginString().StringPartJSON(text).EndString()
}

// Raw copies a validated input value verbatim (including any whitespace inside it).
func (w *Writer) Raw(value Value) *Writer {
	w.beforeValue()
	w.buf = append(w.buf, value.raw...)
	return w.checked()
}

// BeginString starts a string built from parts; finish it with EndString.
func (w *Writer) BeginString() *Writer {
	w.beforeValue()
	w.buf = append(w.buf, '"')
	return w.checked()
}

func (w *Writer) StringPart(text string) *Writer {
	for i := 0; i < len(text); i++ {
		w.escaped(text[i])
	}
	return w.checked()
}

func (w *Writer) StringPartJSON(text Str) *Writer {
	for _, b := range text.Decode(nil) {
		w.escaped(b)
	}
	return w.checked()
}

func (w *Writer) StringPartInt(value int64) *Writer {
	w.buf = appendDecimal(w.buf, value)
	return w.checked()
}

func (w *Writer) EndString() *Writer {
	w.buf = append(w.buf, '"')
	return w.checked()
}

// escaped writes one byte of UTF-8 text inside a string; multi-byte sequences never contain
// bytes below 0x80, so escaping byte by byte is exact.
func (w *Writer) escaped(b byte) {
	switch b {
	case '"':
		w.buf = append(w.buf, '\\', '"')
	case '\\':
		w.buf = append(w.buf, '\\', '\\')
	case 0x08:
		w.buf = append(w.buf, '\\', 'b')
	case '\t':
		w.buf = append(w.buf, '\\', 't')
	case '\n':
		w.buf = append(w.buf, '\\', 'n')
	case 0x0c:
		w.buf = append(w.buf, '\\', 'f')
	case '\r':
		w.buf = append(w.buf, '\\', 'r')
	default:
		if b < 0x20 {
			w.buf = append(w.buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&15])
		} else {
			w.buf = append(w.buf, b)
		}
	}
}

func appendDecimal(dst []byte, value int64) []byte {
	magnitude := uint64(value)
	if value < 0 {
		dst = append(dst, '-')
		magnitude = -magnitude
	}
	var digits [20]byte
	at := len(digits)
	for {
		at--
		digits[at] = byte('0' + magnitude%10)
		magnitude /= 10
		if magnitude == 0 {
			break
		}
	}
	return append(dst, digits[at:]...)
}
