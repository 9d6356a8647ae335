// Masking values in text: every occurrence of any of the values is replaced by one mask, with
// overlapping or touching occurrences merged first, so no part of one value survives next to the
// mask of another. The runner masks secrets in guest outputs with it, the runtime a workflow's
// credentials in what a viewer reads of a run.

/** `text` with every occurrence of each of `values` (empty ones ignored) replaced by `mask`. */
export function maskOccurrences(text: string, values: Iterable<string>, mask: string): string {
  const spans: Array<[number, number]> = [];
  for (const value of values) {
    if (value === '') continue;
    for (let at = text.indexOf(value); at !== -1; at = text.indexOf(value, at + 1)) spans.push([at, at + value.length]);
  }
  if (spans.length === 0) return text;
  spans.sort((a, b) => a[0] - b[0]);
  let masked = '';
  let done = 0;
  let [start, end] = spans[0]!;
  for (const [from, to] of spans) {
    if (from <= end) {
      end = Math.max(end, to);
      continue;
    }
    masked += text.slice(done, start) + mask;
    done = end;
    [start, end] = [from, to];
  }
  return masked + text.slice(done, start) + mask + text.slice(end);
}
