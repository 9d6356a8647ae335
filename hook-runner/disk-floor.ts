// The free space a data dir's filesystem keeps for its LMDB store (`--min-free-disk-mib`). Below it
// the runtime's ledger commits nothing (runtime/ledger/floored-ledger.ts): a request is answered 503
// `write_failed` saying the disk is nearly full, a device message is nacked, a run stalls and is tried
// again later; the hook-runner refuses the calls that would write (UNAVAILABLE hook_runner_disk_full,
// which callers retry). Reads go on. Writes are refused before LMDB meets a full disk, because
// lmdb-js 3.5.6 can abort the process on a failed page write (README "Durability"). Free space is
// read with statfs once per PROBE_INTERVAL_MS, off the request path, so a flood can pass the floor by
// one interval's writes. The floor refuses nothing until armed, which each process does before it
// lets calls in: start-up's own writes are few and small (a data-format upgrade, once, indexes what
// is stored: bounded by it), and a process that could not start below the floor could not serve
// reads either. (Shared by both processes; the runner imports no runtime code.)

import { statfs } from 'node:fs/promises';

/** Where the floor says that it was crossed (the runtime's logger fits; the runner adapts its log lines). */
export interface FloorLog {
  info(message: string, fields: Record<string, unknown>): void;
  warn(message: string, fields: Record<string, unknown>): void;
  error(message: string, fields: Record<string, unknown>): void;
}

export const DEFAULT_MIN_FREE_DISK_MIB = 256;
export const PROBE_INTERVAL_MS = 1000;

const MIB = 1024 * 1024;

/** Bytes free to this (unprivileged) process on the filesystem holding `dir`. */
export type FreeSpaceProbe = () => Promise<number>;

/**
 * The bytes a statfs reading says are free to this process; infinite for a filesystem that reports
 * no size at all (ramfs, a tmpfs mounted with size=0: zero blocks, zero free, and room all the same).
 */
export const availableBytes = (stats: { readonly blocks: number; readonly bavail: number; readonly bsize: number }): number =>
  stats.blocks === 0 ? Number.POSITIVE_INFINITY : stats.bavail * stats.bsize;

export const statfsProbe = (dir: string): FreeSpaceProbe => async () => availableBytes(await statfs(dir));

/** A write refused because the disk is below the floor; nothing of it was written. */
export class DiskSpaceLowError extends Error {
  override readonly name = 'DiskSpaceLowError';

  constructor(
    readonly freeBytes: number,
    readonly floorBytes: number,
  ) {
    super(`The data dir's disk has ${mib(freeBytes)} MiB free, below the floor of ${mib(floorBytes)} MiB (--min-free-disk-mib): writes are refused until space is freed.`);
  }
}

const mib = (bytes: number): number => Math.floor(bytes / MIB);

export class DiskFloor {
  readonly floorBytes: number;
  readonly #probe: FreeSpaceProbe;
  readonly #logger: FloorLog;
  /** Unknown until the first probe answers; writes go ahead meanwhile. */
  #freeBytes: number | undefined;
  #low = false;
  #armed = false;
  #timer: NodeJS.Timeout | undefined;
  #probing: Promise<void> | undefined;
  #readFailing = false;

  /** `floorMib` 0 turns the floor off (the free space is still read, for the gauge). */
  constructor(floorMib: number, probe: FreeSpaceProbe, logger: FloorLog) {
    this.floorBytes = floorMib * MIB;
    this.#probe = probe;
    this.#logger = logger;
  }

  /** The free space last read (undefined before the first read answers). */
  get freeBytes(): number | undefined {
    return this.#freeBytes;
  }

  /** Reads the free space now and then once per PROBE_INTERVAL_MS until closed. */
  start(): void {
    void this.probeNow();
    this.#timer = setInterval(() => void this.probeNow(), PROBE_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Reads the free space once (one read at a time); a failed read keeps the last answer and logs (once until a read works). */
  probeNow(): Promise<void> {
    this.#probing ??= this.#read().finally(() => {
      this.#probing = undefined;
    });
    return this.#probing;
  }

  /** From now on, writes are refused while the disk is below the floor. */
  arm(): void {
    this.#armed = true;
  }

  /** No more writes are refused: for a stop's own last few bytes (the runtime's boot record), as start-up's own writes go before arm. */
  disarm(): void {
    this.#armed = false;
  }

  /** The error to refuse a write with, or undefined while the disk is above the floor (or the floor is not armed). */
  refusal(): DiskSpaceLowError | undefined {
    return this.#armed && this.#low ? new DiskSpaceLowError(this.#freeBytes ?? 0, this.floorBytes) : undefined;
  }

  /** Throws the refusal, if a write now would be refused: for work done elsewhere before the ledger writes (the hook-runner's). */
  assertWritable(): void {
    const refusal = this.refusal();
    if (refusal !== undefined) throw refusal;
  }

  close(): void {
    clearInterval(this.#timer);
  }

  async #read(): Promise<void> {
    let free: number;
    try {
      free = await this.#probe();
    } catch (error) {
      if (!this.#readFailing) this.#logger.warn('could not read the free space of the data dir', { error: String(error) });
      this.#readFailing = true;
      return;
    }
    this.#readFailing = false;
    this.#freeBytes = free;
    const low = this.floorBytes > 0 && free < this.floorBytes;
    if (low === this.#low) return;
    this.#low = low;
    const fields = { free_mib: mib(free), floor_mib: mib(this.floorBytes) };
    if (low) this.#logger.error('the data dir disk is below its floor: writes are refused until space is freed', fields);
    else this.#logger.info('the data dir disk is above its floor again: writes go ahead', fields);
  }
}
