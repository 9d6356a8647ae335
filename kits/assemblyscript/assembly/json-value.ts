// The output document model of the AssemblyScript kit: JsonValue trees a handler builds and
// returns; a value from the input can be embedded verbatim with JsonValue.ofView.
import { JsonView } from "./json-view";

export enum ValueKind {
  Null,
  Bool,
  Integer,
  String,
  Array,
  Object,
  Raw,
}

/**
 * A JSON value to write. Objects keep insertion order; setting an existing key replaces its
 * value in place. Integers only: floating point formatting differs across languages, and the
 * kits promise byte-identical output.
 */
export class JsonValue {
  readonly kind: ValueKind;
  private flag: bool = false;
  private integer: i64 = 0;
  private text: string = "";
  private view: JsonView | null = null;
  private keyList: Array<string> | null = null;
  private valueList: Array<JsonValue> | null = null;

  constructor(kind: ValueKind) {
    this.kind = kind;
    if (kind == ValueKind.Array || kind == ValueKind.Object) this.valueList = new Array<JsonValue>();
    if (kind == ValueKind.Object) this.keyList = new Array<string>();
  }

  static ofNull(): JsonValue {
    return new JsonValue(ValueKind.Null);
  }

  static ofBool(value: bool): JsonValue {
    const v = new JsonValue(ValueKind.Bool);
    v.flag = value;
    return v;
  }

  static ofI64(value: i64): JsonValue {
    const v = new JsonValue(ValueKind.Integer);
    v.integer = value;
    return v;
  }

  static ofString(value: string): JsonValue {
    const v = new JsonValue(ValueKind.String);
    v.text = value;
    return v;
  }

  /** The input value's JSON text, copied verbatim (including any whitespace inside it). */
  static ofView(value: JsonView): JsonValue {
    const v = new JsonValue(ValueKind.Raw);
    v.view = value;
    return v;
  }

  static newArray(): JsonValue {
    return new JsonValue(ValueKind.Array);
  }

  static newObject(): JsonValue {
    return new JsonValue(ValueKind.Object);
  }

  isTrue(): bool {
    return this.kind == ValueKind.Bool && this.flag;
  }

  asI64(): i64 {
    return this.integer;
  }

  asString(): string {
    return this.text;
  }

  asView(): JsonView | null {
    return this.view;
  }

  /** Member count of an object, element count of an array, 0 otherwise. */
  get size(): i32 {
    const values = this.valueList;
    return values == null ? 0 : values.length;
  }

  /** Object key at `index` (insertion order); empty for non-objects or out of range. */
  keyAt(index: i32): string {
    const keys = this.keyList;
    if (keys == null || index < 0 || index >= keys.length) return "";
    return keys[index];
  }

  /** Array element or object member value at `index`, or null when out of range. */
  at(index: i32): JsonValue | null {
    const values = this.valueList;
    if (values == null || index < 0 || index >= values.length) return null;
    return values[index];
  }

  /** Sets an object member (replacing an existing key in place); returns this for chaining. */
  set(key: string, value: JsonValue): JsonValue {
    const keys = this.keyList;
    const values = this.valueList;
    if (keys == null || values == null) unreachable();
    for (let i = 0; i < keys!.length; i++) {
      if (keys![i] == key) {
        values![i] = value;
        return this;
      }
    }
    keys!.push(key);
    values!.push(value);
    return this;
  }

  /** Appends an array element; returns this for chaining. */
  push(value: JsonValue): JsonValue {
    const values = this.valueList;
    if (values == null || this.kind != ValueKind.Array) unreachable();
    values!.push(value);
    return this;
  }
}
