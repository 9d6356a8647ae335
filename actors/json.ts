// The JSON value type used for step results and evidence kept in run snapshots.
// Snapshots are persisted as JSON, so anything stored in run context must be one of these.

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | readonly JsonValue[] | { readonly [key: string]: JsonValue };
