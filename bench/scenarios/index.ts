// The scenario registry: the order here is the order of `npm run bench` and of the table.
// To add a scenario, implement `Scenario` (bench/scenario.ts) and list it here.

import type { Scenario } from '../scenario.ts';
import { devicesScenario } from './devices/devices-scenario.ts';
import { e2eScenario } from './e2e/e2e-scenario.ts';
import { fairnessScenario } from './fairness/fairness-scenario.ts';
import { fanoutScenario } from './fanout/fanout-scenario.ts';
import { ingestScenario } from './ingest/ingest-scenario.ts';
import { plannedScenarios } from './not-yet-measured.ts';
import { recoveryScenario } from './recovery/recovery-scenario.ts';
import { wasmScenario } from './wasm/wasm-scenario.ts';

export const SCENARIOS: readonly Scenario[] = [ingestScenario, e2eScenario, wasmScenario, recoveryScenario, fairnessScenario, fanoutScenario, devicesScenario, ...plannedScenarios];

export function findScenario(name: string): Scenario | undefined {
  return SCENARIOS.find((scenario) => scenario.name === name);
}
