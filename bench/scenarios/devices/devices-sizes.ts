// How much load the devices scenario offers, full and --quick: sockets, messages in flight per socket,
// warm-up and measured messages. A closed loop: the number in flight, not a rate, is held constant.

import { MAX_MESSAGES_IN_FLIGHT } from '../../../runtime/triggers/device-frame.ts';

export interface DevicesSizes {
  /** Device sockets, one per registered device (at most 1,000 devices per org). */
  readonly devices: number;
  /** Messages each socket keeps unacked; at most MAX_MESSAGES_IN_FLIGHT, past which Sluice nacks. */
  readonly inFlightPerSocket: number;
  /** JSON bytes of each message's payload (the frame adds its id and type). */
  readonly payloadBytes: number;
  readonly warmup: number;
  readonly count: number;
  /** Bound on the load worker's whole run (connect, warm-up, measured phase). */
  readonly timeoutMs: number;
}

export function devicesSizes(quick: boolean): DevicesSizes {
  const sizes: DevicesSizes = quick
    ? { devices: 4, inFlightPerSocket: 4, payloadBytes: 1024, warmup: 200, count: 1000, timeoutMs: 60_000 }
    : { devices: 100, inFlightPerSocket: 4, payloadBytes: 1024, warmup: 10_000, count: 100_000, timeoutMs: 300_000 };
  if (sizes.inFlightPerSocket > MAX_MESSAGES_IN_FLIGHT) throw new RangeError(`at most ${MAX_MESSAGES_IN_FLIGHT} messages in flight per device socket`);
  return sizes;
}
