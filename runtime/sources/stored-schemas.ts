// How sources and devices keep their declared event schemas in the ledger: as one JSON text
// (`event_types_json`) beside the record's other fields, so a read that needs none of them (a
// token or signature check, a connection's start or end, a sandbox reset, a start) decodes one
// string instead of ~1 MB of schema objects (~30 ms). Records of earlier releases hold
// `event_types` as objects (devices before data format 7, sources before 8), or neither (from
// before schemas were declared): they are read as they are.

/** Declared event types and their JSON Schemas. */
type Schemas = Readonly<Record<string, object>>;

/** A record as stored: its head (every field but the schemas) and the schemas in either form. */
export type WithStoredSchemas<Head> = Head & { readonly event_types_json?: string; readonly event_types?: Schemas };

/** The record to store: the schemas as text. */
export function withSchemaText<Head>(record: Head & { readonly event_types: Schemas }): WithStoredSchemas<Head> {
  const { event_types: eventTypes, ...head } = record;
  return { ...(head as Head), event_types_json: JSON.stringify(eventTypes ?? {}) };
}

/** The record a stored one holds, its schemas parsed. */
export function withSchemasParsed<Head>(stored: WithStoredSchemas<Head>): Head & { readonly event_types: Schemas } {
  const { event_types_json: text, event_types: eventTypes, ...head } = stored;
  return { ...(head as Head), event_types: text === undefined ? (eventTypes ?? {}) : (JSON.parse(text) as Record<string, object>) };
}

/** The head a stored record holds: without its schemas, in either form. */
export function withoutSchemas<Head>(stored: WithStoredSchemas<Head>): Head {
  const { event_types_json: _text, event_types: _eventTypes, ...head } = stored;
  return head as Head;
}
