// A clock whose wall time can be set apart from the time that passes on its monotonic clock, for
// tests of wall-clock steps (an NTP step, a clock behind at the start): `wall` is set directly,
// `advance` moves both.

import type { Clock } from '../../runtime/clock.ts';

export class SettableClock implements Clock {
  wall: number;
  passed = 0;
  constructor(wall: number) {
    this.wall = wall;
  }
  now(): number {
    return this.wall;
  }
  monotonic(): number {
    return this.passed;
  }
  advance(ms: number): void {
    this.wall += ms;
    this.passed += ms;
  }
}
