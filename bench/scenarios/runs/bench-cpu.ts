// How much CPU the bench process itself used over a window, in cores: the load generator, receiver
// and subscribers live here, so a share near 1.0 would mean the bench, not Sluice, set the pace.

import { performance } from 'node:perf_hooks';

/** Starts a window; the returned function ends it and gives the cores used (0.5 = half of one core). */
export function startCpuWindow(): () => number {
  const cpu = process.cpuUsage();
  const started = performance.now();
  return () => {
    const used = process.cpuUsage(cpu);
    const wallMs = performance.now() - started;
    return wallMs <= 0 ? 0 : (used.user + used.system) / 1000 / wallMs;
  };
}

export function describeCpu(what: string, cores: number): string {
  const verdict = cores < 0.8 ? 'not the bottleneck' : 'WARNING: close to one full core, the bench itself may be the bottleneck';
  return `the bench process (${what}) used ${(cores * 100).toFixed(0)} % of one core: ${verdict}`;
}
