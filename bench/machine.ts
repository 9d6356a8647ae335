// What the numbers were measured on: cores, CPU, memory, Node version, the load already on the machine,
// and the filesystem that holds the data directories (fsync on tmpfs is free, so durability there would lie).

import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os';
import { probeFsync, type FsyncProbe } from './harness/fsync-probe.ts';

export interface MachineInfo {
  readonly cores: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly nodeVersion: string;
  readonly platform: string;
  readonly kernel: string;
  /** Filesystem type of the directory that holds the data dirs, from /proc/mounts; `unknown` elsewhere. */
  readonly dataDirFilesystem: string;
  /** 1, 5 and 15 minute load averages when the run started: other work on the machine skews every number. */
  readonly loadAverageAtStart: readonly number[];
  /** 4 KB append + fdatasync on the data-dir disk, measured just before the run. */
  readonly fsync: FsyncProbe;
}

/** Above this 1-minute load per core at the start, the report warns that the machine was busy. */
export const BUSY_LOAD_PER_CORE = 0.5;

export function isBusy(machine: MachineInfo): boolean {
  return (machine.loadAverageAtStart[0] ?? 0) > BUSY_LOAD_PER_CORE * machine.cores;
}

/** Call before starting any load: the load average and the fsync probe are part of the description. */
export function describeMachine(dataDir: string, fsyncSamples: number): MachineInfo {
  return {
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    nodeVersion: process.version,
    platform: `${process.platform}-${process.arch}`,
    kernel: release(),
    dataDirFilesystem: filesystemOf(dataDir),
    loadAverageAtStart: loadavg().map((n) => Math.round(n * 100) / 100),
    fsync: probeFsync(dataDir, fsyncSamples),
  };
}

function filesystemOf(path: string): string {
  let mounts: string;
  try {
    mounts = readFileSync('/proc/mounts', 'utf8');
  } catch {
    return 'unknown';
  }
  let best = { point: '', type: 'unknown' };
  for (const line of mounts.split('\n')) {
    const [, point, type] = line.split(' ');
    if (point === undefined || type === undefined) continue;
    const covers = point === '/' || path === point || path.startsWith(`${point}/`);
    if (covers && point.length > best.point.length) best = { point, type };
  }
  return best.type;
}
