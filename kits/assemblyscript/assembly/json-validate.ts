// The strict RFC 8259 validator of the AssemblyScript kit: one pass over the UTF-8 input in
// linear memory that also fills the skip index (end offset of every string and container).
import { JsonDoc, JsonView, hex4 } from "./json-view";

/**
 * Arrays and objects nested deeper than this are refused. The envelope itself is level 1, so a
 * payload of 128 levels, the deepest Sluice stores (a webhook body is the payload), reaches 129.
 */
export const MAX_DEPTH: i32 = 129;

/**
 * Validates [ptr, ptr + len) as exactly one JSON document; null when it is not JSON, nests
 * deeper than MAX_DEPTH or holds a lone surrogate escape. The skip index takes 4 bytes per
 * input byte; when memory cannot grow for it the views scan instead (slower, same results).
 */
export function parseJson(ptr: usize, len: usize): JsonView | null {
  const ends = indexMemory(len);
  const v = new Validator(ptr, ptr + len, ends);
  v.whitespace();
  const start = v.pos;
  if (!v.value(1)) return null;
  const end = v.pos;
  v.whitespace();
  if (v.pos != v.end) return null;
  return new JsonView(new JsonDoc(ptr, ends), start, end);
}

/** A block for the index, or 0. Memory is grown here first because the stub runtime's
 * allocator traps (instead of failing) when memory cannot grow. */
function indexMemory(len: usize): usize {
  if (len == 0 || len > 0x3fffffff) return 0;
  const bytes = len << 2;
  const top = heap.alloc(0);
  const needPages = <i32>((top + bytes + 0x1ffff) >> 16) - memory.size();
  if (needPages > 0 && memory.grow(needPages) < 0) return 0;
  return heap.alloc(bytes);
}

class Validator {
  pos: usize;
  end: usize;
  ends: usize;
  base: usize;

  constructor(pos: usize, end: usize, ends: usize) {
    this.pos = pos;
    this.end = end;
    this.ends = ends;
    this.base = pos;
  }

  @inline record(start: usize): void {
    if (this.ends != 0) store<u32>(this.ends + ((start - this.base) << 2), <u32>(this.pos - this.base));
  }

  @inline peek(): i32 {
    return this.pos < this.end ? <i32>load<u8>(this.pos) : -1;
  }

  whitespace(): void {
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) return;
      this.pos++;
    }
  }

  value(depth: i32): bool {
    const c = this.peek();
    if (c == 0x7b) return this.container(depth, 0x7d, true);
    if (c == 0x5b) return this.container(depth, 0x5d, false);
    if (c == 0x22) return this.string();
    if (c == 0x74) return this.word("true");
    if (c == 0x66) return this.word("false");
    if (c == 0x6e) return this.word("null");
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    return false;
  }

  word(text: string): bool {
    const length = <usize>text.length;
    if (this.end - this.pos < length) return false;
    for (let i: usize = 0; i < length; i++) {
      if (<i32>load<u8>(this.pos + i) != text.charCodeAt(<i32>i)) return false;
    }
    this.pos += length;
    return true;
  }

  container(depth: i32, close: i32, object: bool): bool {
    if (depth > MAX_DEPTH) return false;
    const start = this.pos;
    this.pos++;
    this.whitespace();
    if (this.peek() == close) {
      this.pos++;
      this.record(start);
      return true;
    }
    while (true) {
      if (object) {
        if (this.peek() != 0x22 || !this.string()) return false;
        this.whitespace();
        if (this.peek() != 0x3a) return false;
        this.pos++;
        this.whitespace();
      }
      if (!this.value(depth + 1)) return false;
      this.whitespace();
      const next = this.peek();
      this.pos++;
      if (next == close) break;
      if (next != 0x2c) return false;
      this.whitespace();
    }
    this.record(start);
    return true;
  }

  digits(): usize {
    const start = this.pos;
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c < 0x30 || c > 0x39) break;
      this.pos++;
    }
    return this.pos - start;
  }

  number(): bool {
    if (this.peek() == 0x2d) this.pos++;
    if (this.peek() == 0x30) this.pos++;
    else if (this.digits() == 0) return false;
    if (this.peek() == 0x2e) {
      this.pos++;
      if (this.digits() == 0) return false;
    }
    const e = this.peek();
    if (e == 0x65 || e == 0x45) {
      this.pos++;
      const sign = this.peek();
      if (sign == 0x2b || sign == 0x2d) this.pos++;
      if (this.digits() == 0) return false;
    }
    return true;
  }

  string(): bool {
    const start = this.pos;
    let pos = start + 1;
    const end = this.end;
    while (true) {
      if (pos >= end) return false;
      const c = load<u8>(pos++);
      if (c == 0x22) break;
      if (c == 0x5c) {
        this.pos = pos;
        if (!this.escape()) return false;
        pos = this.pos;
      } else if (c < 0x20) {
        return false;
      }
    }
    this.pos = pos;
    this.record(start);
    return true;
  }

  /** The escape after a backslash (at this.pos). */
  escape(): bool {
    if (this.pos >= this.end) return false;
    const e = load<u8>(this.pos++);
    if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
      return true;
    }
    if (e != 0x75) return false;
    const unit = hex4(this.pos, this.end);
    this.pos += 4;
    if (unit < 0 || (unit >= 0xdc00 && unit <= 0xdfff)) return false;
    if (unit >= 0xd800 && unit <= 0xdbff) {
      if (this.end - this.pos < 6 || load<u8>(this.pos) != 0x5c || load<u8>(this.pos + 1) != 0x75) return false;
      const low = hex4(this.pos + 2, this.end);
      if (low < 0xdc00 || low > 0xdfff) return false;
      this.pos += 6;
    }
    return true;
  }
}
