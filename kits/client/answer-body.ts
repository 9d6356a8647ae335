// An answer's body read as text, up to a cap: no Sluice answer comes near MAX_ANSWER_BYTES (a page
// ends past 16 MiB of items, and one item is at most an 8 MiB event), so a larger body is not
// Sluice's (a proxy's download, a wrong url) and is not held: reading a 600 MB one whole, five times
// over with retries, took a CLI command to 1.4 GB and failed only as "Cannot create a string".

/** Bytes of one answer the client reads at most. */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * Reads `response`'s body as UTF-8 text; undefined once it passes `cap` bytes, or its Content-Length
 * says it will (the rest is cancelled, not read).
 */
export async function answerText(response: Response, cap = MAX_ANSWER_BYTES): Promise<string | undefined> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > cap) {
    await response.body?.cancel();
    return undefined;
  }
  if (response.body === null) return '';
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > cap) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}
