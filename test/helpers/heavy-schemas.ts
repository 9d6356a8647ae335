// Event-type schemas near the size cap (~1 MB of JSON in one API body): 16 types whose
// `examples` annotations hold many small objects (the write-time checks and the compile do not
// read an annotation's contents). Tests of what decoding such records costs use them.

/** 16 types `type.0`..`type.15`, each with `perType` example objects of `example()`; `type.0` requires `amount` when asked. */
export function heavySchemas(perType: number, example: (index: number) => object, requireAmount = false): Record<string, object> {
  const types: Record<string, object> = {};
  for (let t = 0; t < 16; t++) {
    const required = requireAmount && t === 0 ? { required: ['amount'] } : {};
    types[`type.${t}`] = { type: 'object', ...required, examples: Array.from({ length: perType }, (_, index) => example(index)) };
  }
  return types;
}
