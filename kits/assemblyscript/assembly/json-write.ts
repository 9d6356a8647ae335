// Serializer of the AssemblyScript kit: writes a JsonValue as compact UTF-8 JSON (the escaping
// of JSON.stringify) into linear memory, NUL-terminated, as the guest ABI's output document.
import { JsonValue, ValueKind } from "./json-value";

/** The host reads at most this many bytes before the NUL (DESIGN 6.5). */
export const MAX_OUTPUT_BYTES: usize = 256 * 1024;

const HEX = "0123456789abcdef";

class ByteBuffer {
  ptr: usize;
  len: usize = 0;
  capacity: usize;

  constructor(capacity: usize) {
    this.capacity = capacity;
    this.ptr = heap.alloc(capacity);
  }

  reserve(extra: usize): void {
    const need = this.len + extra;
    if (need <= this.capacity) return;
    // One byte past the limit is kept for the NUL; a bigger document could never be read.
    if (need > MAX_OUTPUT_BYTES + 1) unreachable();
    let capacity = this.capacity * 2;
    while (capacity < need) capacity *= 2;
    // Never past the limit: every byte beyond it comes back here and traps.
    if (capacity > MAX_OUTPUT_BYTES + 1) capacity = MAX_OUTPUT_BYTES + 1;
    this.ptr = heap.realloc(this.ptr, capacity);
    this.capacity = capacity;
  }

  byte(b: u32): void {
    this.reserve(1);
    store<u8>(this.ptr + this.len, <u8>b);
    this.len++;
  }

  bytes(ptr: usize, length: usize): void {
    this.reserve(length);
    memory.copy(this.ptr + this.len, ptr, length);
    this.len += length;
  }

  ascii(text: string): void {
    for (let i = 0; i < text.length; i++) this.byte(<u32>text.charCodeAt(i));
  }
}

/** Serializes `value` and returns the address of the NUL-terminated document. */
export function writeDocument(value: JsonValue): usize {
  const out = new ByteBuffer(1024);
  writeValue(out, value);
  out.byte(0);
  return out.ptr;
}

function writeValue(out: ByteBuffer, value: JsonValue): void {
  switch (value.kind) {
    case ValueKind.Null:
      out.ascii("null");
      break;
    case ValueKind.Bool:
      out.ascii(value.isTrue() ? "true" : "false");
      break;
    case ValueKind.Integer:
      out.ascii(value.asI64().toString());
      break;
    case ValueKind.String:
      writeString(out, value.asString());
      break;
    case ValueKind.Raw: {
      const view = value.asView()!;
      out.bytes(view.start, view.end - view.start);
      break;
    }
    case ValueKind.Array: {
      out.byte(0x5b);
      for (let i = 0; i < value.size; i++) {
        if (i > 0) out.byte(0x2c);
        writeValue(out, value.at(i)!);
      }
      out.byte(0x5d);
      break;
    }
    default: {
      out.byte(0x7b);
      for (let i = 0; i < value.size; i++) {
        if (i > 0) out.byte(0x2c);
        writeString(out, value.keyAt(i));
        out.byte(0x3a);
        writeValue(out, value.at(i)!);
      }
      out.byte(0x7d);
    }
  }
}

function writeUnicodeEscape(out: ByteBuffer, unit: u32): void {
  out.byte(0x5c);
  out.byte(0x75);
  for (let shift = 12; shift >= 0; shift -= 4) out.byte(<u32>HEX.charCodeAt((unit >> shift) & 0xf));
}

/** Encodes UTF-16 `text` as an escaped UTF-8 JSON string; a lone surrogate becomes `\udxxx`. */
function writeString(out: ByteBuffer, text: string): void {
  out.byte(0x22);
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const unit = <u32>text.charCodeAt(i);
    if (unit < 0x80) {
      if (unit == 0x22 || unit == 0x5c) {
        out.byte(0x5c);
        out.byte(unit);
      } else if (unit >= 0x20) {
        out.byte(unit);
      } else if (unit == 0x08) {
        out.ascii("\\b");
      } else if (unit == 0x09) {
        out.ascii("\\t");
      } else if (unit == 0x0a) {
        out.ascii("\\n");
      } else if (unit == 0x0c) {
        out.ascii("\\f");
      } else if (unit == 0x0d) {
        out.ascii("\\r");
      } else {
        writeUnicodeEscape(out, unit);
      }
    } else if (unit < 0x800) {
      out.byte(0xc0 | (unit >> 6));
      out.byte(0x80 | (unit & 0x3f));
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      const next = i + 1 < length ? <u32>text.charCodeAt(i + 1) : 0;
      if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        const point = 0x10000 + ((unit - 0xd800) << 10) + (next - 0xdc00);
        out.byte(0xf0 | (point >> 18));
        out.byte(0x80 | ((point >> 12) & 0x3f));
        out.byte(0x80 | ((point >> 6) & 0x3f));
        out.byte(0x80 | (point & 0x3f));
        i++;
      } else {
        writeUnicodeEscape(out, unit);
      }
    } else {
      out.byte(0xe0 | (unit >> 12));
      out.byte(0x80 | ((unit >> 6) & 0x3f));
      out.byte(0x80 | (unit & 0x3f));
    }
  }
  out.byte(0x22);
}
