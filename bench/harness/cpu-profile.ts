// The bench's profiling knob: `SLUICE_BENCH_CPU_PROF=<dir>` makes every `sluice serve` the bench
// starts write a V8 CPU profile into that directory when it stops.

/** Node flags to put before the script: none unless the knob is set. */
export function cpuProfileArgs(): string[] {
  const dir = process.env['SLUICE_BENCH_CPU_PROF'];
  return dir === undefined || dir === '' ? [] : ['--cpu-prof', '--cpu-prof-dir', dir];
}
