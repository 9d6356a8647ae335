// When a caller's gRPC deadline has passed. grpc-js hands the server the deadline as a wall-clock
// Date (from the call's relative timeout), and a wall clock stepped forward while a call waited (an
// NTP step, a VM resumed) made every queued call read as given up: uploads failed compile_abandoned
// and runs invoke_abandoned within a second of an hour's jump. The time left is read from the wall
// clock once, as the call arrives, and kept by the monotonic clock from then on.

/** A check of whether `deadline` (a Date, ms since the epoch, or Infinity) has passed. */
export function deadlinePassed(deadline: Date | number, wallNow = Date.now(), monotonicNow: () => number = () => performance.now()): () => boolean {
  const leftMs = (deadline instanceof Date ? deadline.getTime() : Number(deadline)) - wallNow;
  const until = monotonicNow() + leftMs;
  return () => monotonicNow() >= until;
}
