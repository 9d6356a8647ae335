// Encodes LiveMessage frames and decodes ClientMessage frames of proto/live.proto (protobufjs).
// Decoding is a boundary: it returns a typed value or throws, never a half-read message.

import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

export interface RunUpdate {
  readonly run_id: string;
  readonly state: string;
  readonly channel: string;
  readonly workflow_id: string;
  readonly event_id: string;
  readonly step_id: string;
  readonly attempt: number;
  readonly seq: number;
  readonly at_ms: number;
  readonly error: string;
  readonly environment: string;
}

export interface Heartbeat {
  readonly at_ms: number;
  readonly last_seq: number;
  /** Subscribe frames the server had applied on the socket when it sent this heartbeat. */
  readonly subscribe_frames: number;
}

export type LiveMessage = { readonly run_update: RunUpdate } | { readonly heartbeat: Heartbeat };

export interface Subscribe {
  readonly after_seq: number;
  readonly environment: string;
  readonly run_id: string;
  /** after_seq is a position, even 0 (live.proto); absent: false. */
  readonly strict?: boolean;
}

export type ClientMessage = { readonly subscribe: Subscribe };

const root = new protobuf.Root().loadSync(fileURLToPath(new URL('../../proto/live.proto', import.meta.url)), { keepCase: true });
const LiveMessageType = root.lookupType('sluice.live.v1.LiveMessage');
const ClientMessageType = root.lookupType('sluice.live.v1.ClientMessage');
const toObjectOptions = { longs: Number, defaults: true, oneofs: false } as const;

/** Encodes the typed object as it is (its fields already have the proto's types: no fromObject copy, one per live frame). */
export function encodeLiveMessage(message: LiveMessage): Uint8Array {
  return LiveMessageType.encode(message).finish();
}

export function decodeLiveMessage(bytes: Uint8Array): LiveMessage {
  const decoded = LiveMessageType.toObject(LiveMessageType.decode(bytes), toObjectOptions) as Partial<Record<'run_update' | 'heartbeat', unknown>>;
  if (decoded.run_update !== undefined && decoded.run_update !== null) return { run_update: decoded.run_update as RunUpdate };
  if (decoded.heartbeat !== undefined && decoded.heartbeat !== null) return { heartbeat: decoded.heartbeat as Heartbeat };
  throw new UnknownLiveMessageError();
}

/** A well-formed LiveMessage of a kind this reader does not know (sent by a newer server): skipped by clients. */
export class UnknownLiveMessageError extends Error {
  constructor() {
    super('LiveMessage carries neither run_update nor heartbeat');
    this.name = 'UnknownLiveMessageError';
  }
}

/** Throws when the bytes are not a ClientMessage carrying a Subscribe. */
export function decodeClientMessage(bytes: Uint8Array): ClientMessage {
  const message = ClientMessageType.decode(bytes);
  const object = ClientMessageType.toObject(message, { ...toObjectOptions, defaults: false }) as { subscribe?: Partial<Subscribe> };
  if (object.subscribe === undefined) throw new Error('ClientMessage must carry subscribe');
  return {
    subscribe: {
      after_seq: Number(object.subscribe.after_seq ?? 0),
      environment: object.subscribe.environment ?? '',
      run_id: object.subscribe.run_id ?? '',
      strict: object.subscribe.strict ?? false,
    },
  };
}

export function encodeClientMessage(message: ClientMessage): Uint8Array {
  return ClientMessageType.encode(ClientMessageType.fromObject(message)).finish();
}
