// Zero-copy views over validated JSON for the AssemblyScript kit: a JsonView is the byte range
// of one value; accessors walk it lazily and jump over nested values through the skip index.

export enum JsonKind {
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

/** One parsed document: where it starts and its skip index (0: none, scan instead). */
export class JsonDoc {
  constructor(
    public base: usize,
    public ends: usize,
  ) {}
}

/** A validated JSON value in linear memory: [start, end), no surrounding whitespace. */
export class JsonView {
  readonly kind: JsonKind;

  constructor(
    public doc: JsonDoc,
    public start: usize,
    public end: usize,
  ) {
    const c = load<u8>(start);
    this.kind =
      c == 0x6e ? JsonKind.Null
      : c == 0x74 || c == 0x66 ? JsonKind.Bool
      : c == 0x22 ? JsonKind.String
      : c == 0x5b ? JsonKind.Array
      : c == 0x7b ? JsonKind.Object
      : JsonKind.Number;
  }

  isNull(): bool {
    return this.kind == JsonKind.Null;
  }

  /** True only for the literal `true`. */
  isTrue(): bool {
    return load<u8>(this.start) == 0x74;
  }

  /** The object member `key` (the last one when a key repeats, as JSON.parse does). */
  get(key: string): JsonView | null {
    if (this.kind != JsonKind.Object) return null;
    let found = false;
    let foundStart: usize = 0;
    let foundEnd: usize = 0;
    let pos = skipWhitespace(this.start + 1, this.end);
    while (pos < this.end && load<u8>(pos) == 0x22) {
      const keyEnd = skip(this.doc, pos);
      const valueStart = skipWhitespace(skipWhitespace(keyEnd, this.end) + 1, this.end);
      const valueEnd = skip(this.doc, valueStart);
      if (bodyEquals(pos + 1, keyEnd - 1, key)) {
        found = true;
        foundStart = valueStart;
        foundEnd = valueEnd;
      }
      pos = skipWhitespace(skipWhitespace(valueEnd, this.end) + 1, this.end);
    }
    return found ? new JsonView(this.doc, foundStart, foundEnd) : null;
  }

  /** Iterates array elements or object members: `while (c.next()) use(c.value)`. */
  cursor(): JsonCursor {
    return new JsonCursor(this);
  }

  /** The decoded string, or null when this is not a string. */
  asString(): string | null {
    if (this.kind != JsonKind.String) return null;
    return decodeBody(this.start + 1, this.end - 1);
  }

  /** Length in bytes of the decoded UTF-8 text (0 for non-strings). */
  utf8Length(): i32 {
    if (this.kind != JsonKind.String) return 0;
    let length = 0;
    let pos = this.start + 1;
    const end = this.end - 1;
    while (pos < end) {
      if (load<u8>(pos) != 0x5c) {
        length++;
        pos++;
        continue;
      }
      const e = load<u8>(pos + 1);
      if (e != 0x75) {
        length++;
        pos += 2;
        continue;
      }
      const unit = hex4(pos + 2, end);
      pos += 6;
      if (unit >= 0xd800 && unit <= 0xdbff) {
        length += 4;
        pos += 6;
      } else {
        length += unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3;
      }
    }
    return length;
  }

  /** Whether this is an integer literal (no fraction, no exponent) that fits in an i64. */
  isI64(): bool {
    return this.kind == JsonKind.Number && parseInteger(this.start, this.end);
  }

  /** The integer value; 0 unless isI64(). */
  toI64(): i64 {
    return this.isI64() ? parsedInteger : 0;
  }
}

/** Iteration over an array's elements or an object's members (`key` is set for objects). */
export class JsonCursor {
  private pos: usize;
  private readonly object: bool;
  key: JsonView | null = null;
  value: JsonView | null = null;

  constructor(private readonly container: JsonView) {
    const kind = container.kind;
    this.object = kind == JsonKind.Object;
    this.pos = kind == JsonKind.Array || this.object ? skipWhitespace(container.start + 1, container.end) : container.end;
  }

  next(): bool {
    const c = this.container;
    if (this.pos >= c.end) return false;
    const first = load<u8>(this.pos);
    if (first == 0x5d || first == 0x7d) {
      this.pos = c.end;
      return false;
    }
    let start = this.pos;
    if (this.object) {
      const keyEnd = skip(c.doc, start);
      this.key = new JsonView(c.doc, start, keyEnd);
      start = skipWhitespace(skipWhitespace(keyEnd, c.end) + 1, c.end);
    }
    const end = skip(c.doc, start);
    this.value = new JsonView(c.doc, start, end);
    this.pos = skipWhitespace(skipWhitespace(end, c.end) + 1, c.end);
    return true;
  }
}

function skipWhitespace(pos: usize, end: usize): usize {
  while (pos < end) {
    const c = load<u8>(pos);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    pos++;
  }
  return pos;
}

/** The address just past the validated value at `pos`. */
function skip(doc: JsonDoc, pos: usize): usize {
  const c = load<u8>(pos);
  if (c == 0x22 || c == 0x7b || c == 0x5b) {
    if (doc.ends != 0) return doc.base + <usize>load<u32>(doc.ends + ((pos - doc.base) << 2));
    if (c == 0x22) return skipString(pos);
    let depth = 0;
    while (true) {
      const b = load<u8>(pos);
      if (b == 0x22) {
        pos = skipString(pos);
        continue;
      }
      if (b == 0x7b || b == 0x5b) depth++;
      else if (b == 0x7d || b == 0x5d) {
        if (--depth == 0) return pos + 1;
      }
      pos++;
    }
  }
  // A scalar inside a container always ends at a delimiter (skip is never asked about a
  // top-level value, which may end at the end of its buffer).
  while (true) {
    const b = load<u8>(pos);
    if (b == 0x2c || b == 0x7d || b == 0x5d || b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d) return pos;
    pos++;
  }
}

function skipString(pos: usize): usize {
  pos++;
  while (true) {
    const b = load<u8>(pos);
    if (b == 0x5c) pos += 2;
    else if (b == 0x22) return pos + 1;
    else pos++;
  }
}

/** Compares a raw string body [start, end) with `text`, decoding escapes only when present. */
function bodyEquals(start: usize, end: usize, text: string): bool {
  // Fast path, no allocation: an ASCII body without escapes against an ASCII text.
  const length = text.length;
  if (end - start == <usize>length) {
    let i = 0;
    for (; i < length; i++) {
      const b = <i32>load<u8>(start + <usize>i);
      if (b == 0x5c || b >= 0x80 || b != text.charCodeAt(i)) break;
    }
    if (i == length) return true;
    const b = <i32>load<u8>(start + <usize>i);
    if (b != 0x5c && b < 0x80 && text.charCodeAt(i) < 0x80) return false;
  } else {
    let plain = true;
    for (let p = start; p < end; p++) {
      const b = load<u8>(p);
      if (b == 0x5c || b >= 0x80) {
        plain = false;
        break;
      }
    }
    // A plain ASCII body is its own text: lengths differ, so the texts do.
    if (plain) return false;
  }
  return decodeBody(start, end) == text;
}

// Reused buffer for decoding escaped strings: decoding never makes a body longer.
let scratch: usize = 0;
let scratchCapacity: usize = 0;

/** Decodes a validated string body [start, end) into an AssemblyScript string. */
function decodeBody(start: usize, end: usize): string {
  let escaped = false;
  for (let p = start; p < end; p++) {
    if (load<u8>(p) == 0x5c) {
      escaped = true;
      break;
    }
  }
  if (!escaped) return String.UTF8.decodeUnsafe(start, end - start);
  const need = end - start;
  if (need > scratchCapacity) {
    scratch = heap.alloc(need);
    scratchCapacity = need;
  }
  let out = scratch;
  let pos = start;
  while (pos < end) {
    const c = load<u8>(pos);
    if (c != 0x5c) {
      store<u8>(out++, c);
      pos++;
      continue;
    }
    const e = load<u8>(pos + 1);
    pos += 2;
    if (e == 0x75) {
      let point = hex4(pos, end);
      pos += 4;
      if (point >= 0xd800 && point <= 0xdbff) {
        point = 0x10000 + ((point - 0xd800) << 10) + (hex4(pos + 2, end) - 0xdc00);
        pos += 6;
      }
      out = encodeUtf8(out, <u32>point);
      continue;
    }
    let b: u8 = e;
    if (e == 0x62) b = 0x08;
    else if (e == 0x66) b = 0x0c;
    else if (e == 0x6e) b = 0x0a;
    else if (e == 0x72) b = 0x0d;
    else if (e == 0x74) b = 0x09;
    store<u8>(out++, b);
  }
  return String.UTF8.decodeUnsafe(scratch, out - scratch);
}

function encodeUtf8(out: usize, point: u32): usize {
  if (point < 0x80) {
    store<u8>(out, <u8>point);
    return out + 1;
  }
  if (point < 0x800) {
    store<u8>(out, <u8>(0xc0 | (point >> 6)));
    store<u8>(out + 1, <u8>(0x80 | (point & 0x3f)));
    return out + 2;
  }
  if (point < 0x10000) {
    store<u8>(out, <u8>(0xe0 | (point >> 12)));
    store<u8>(out + 1, <u8>(0x80 | ((point >> 6) & 0x3f)));
    store<u8>(out + 2, <u8>(0x80 | (point & 0x3f)));
    return out + 3;
  }
  store<u8>(out, <u8>(0xf0 | (point >> 18)));
  store<u8>(out + 1, <u8>(0x80 | ((point >> 12) & 0x3f)));
  store<u8>(out + 2, <u8>(0x80 | ((point >> 6) & 0x3f)));
  store<u8>(out + 3, <u8>(0x80 | (point & 0x3f)));
  return out + 4;
}

// The result slot of parseInteger (AssemblyScript has no tuples or out-parameters).
let parsedInteger: i64 = 0;

/** Parses `-?digits` in [start, end) into parsedInteger; false for fractions, exponents, overflow. */
function parseInteger(start: usize, end: usize): bool {
  let pos = start;
  const negative = load<u8>(pos) == 0x2d;
  if (negative) pos++;
  let magnitude: u64 = 0;
  for (; pos < end; pos++) {
    const c = load<u8>(pos);
    if (c < 0x30 || c > 0x39) return false;
    const digit = <u64>(c - 0x30);
    if (magnitude > (<u64>0xffffffffffffffff - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  const limit: u64 = negative ? <u64>0x8000000000000000 : <u64>0x7fffffffffffffff;
  if (magnitude > limit) return false;
  // Two's complement: negating the magnitude 2^63 yields i64.MIN_VALUE, as wanted.
  parsedInteger = negative ? <i64>(0 - magnitude) : <i64>magnitude;
  return true;
}

function hexDigit(c: u32): i32 {
  if (c >= 0x30 && c <= 0x39) return <i32>(c - 0x30);
  if (c >= 0x61 && c <= 0x66) return <i32>(c - 0x61 + 10);
  if (c >= 0x41 && c <= 0x46) return <i32>(c - 0x41 + 10);
  return -1;
}

/** The four hex digits at `at` as a code unit, or -1. */
export function hex4(at: usize, end: usize): i32 {
  if (end < at + 4) return -1;
  let unit = 0;
  for (let i: usize = 0; i < 4; i++) {
    const d = hexDigit(<u32>load<u8>(at + i));
    if (d < 0) return -1;
    unit = (unit << 4) | d;
  }
  return unit;
}
