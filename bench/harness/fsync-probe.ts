// Measures what one durable write costs on the data-dir disk right now: append 4 KB and fdatasync,
// repeated. Every durable ingest number is bounded by this, so the report prints it beside them.

import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { summarizeLatencies } from './stats.ts';

export interface FsyncProbe {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/** Synchronous on purpose: it runs before any load, and nothing else should overlap it. */
export function probeFsync(dir: string, samples: number): FsyncProbe {
  const file = join(dir, 'fsync-probe.bin');
  const block = Buffer.alloc(4096, 0x61);
  const latencies = new Float64Array(samples);
  const fd = openSync(file, 'w');
  try {
    for (let i = 0; i < samples; i += 1) {
      const started = performance.now();
      writeSync(fd, block);
      fdatasyncSync(fd);
      latencies[i] = performance.now() - started;
    }
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
  const summary = summarizeLatencies(latencies, samples);
  return { samples, p50Ms: summary?.p50Ms ?? 0, p99Ms: summary?.p99Ms ?? 0 };
}
