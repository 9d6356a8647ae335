// Test helper: wasm modules written byte by byte, for shapes wabt assembles too slowly (deep nests,
// tens of thousands of locals) or not at all: LEB128 encoders and a one-function module builder.

/** Unsigned LEB128, as wasm encodes sizes and counts. */
export function uleb(value: number): number[] {
  const bytes: number[] = [];
  do {
    const byte = value & 0x7f;
    value >>>= 7;
    bytes.push(value === 0 ? byte : byte | 0x80);
  } while (value !== 0);
  return bytes;
}

/**
 * A module (one page, an `execute` returning 0) with a second function of no params whose body is
 * `code` (an `end` is added), declaring `i32Locals` i32 locals.
 */
export function moduleWithFunction(code: number[], i32Locals = 0): Uint8Array {
  const section = (id: number, content: number[]): number[] => [id, ...uleb(content.length), ...content];
  const name = (text: string): number[] => [text.length, ...Buffer.from(text)];
  const locals = i32Locals === 0 ? [0] : [1, ...uleb(i32Locals), 0x7f];
  const body = (declared: number[], ops: number[]): number[] => [...uleb(declared.length + ops.length + 1), ...declared, ...ops, 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [2, 0x60, 2, 0x7f, 0x7f, 1, 0x7f, 0x60, 0, 0]),
    ...section(3, [2, 0, 1]),
    ...section(5, [1, 0x00, 1]),
    ...section(7, [2, ...name('memory'), 0x02, 0, ...name('execute'), 0x00, 0]),
    ...section(10, [2, ...body([0], [0x41, 0]), ...body(locals, code)]),
  ]);
}

/**
 * A small module within every admission cap that Cranelift still compiles for about a minute on the
 * 2-core machine: 20,000 locals each read inside 50 nested loops (~80 KB).
 */
export function slowToCompileModule(): Uint8Array {
  const depth = 50;
  const locals = 20_000;
  const reads = Array.from({ length: locals }, (_, index) => [0x20, ...uleb(index), 0x1a]).flat();
  return moduleWithFunction([...Array(depth).fill([0x03, 0x40]).flat(), ...reads, ...Array(depth).fill(0x0b)], locals);
}
