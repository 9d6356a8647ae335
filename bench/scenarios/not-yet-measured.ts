// Scenarios the issue names but later issues will build: each reports a "not yet measured" row,
// never a number, so the table shows the whole plan. Replace one by a real Scenario to measure it.

import type { Scenario, ScenarioReport } from '../scenario.ts';

interface PlannedScenario {
  readonly name: string;
  readonly title: string;
  readonly unit: string;
  readonly plan: string;
}

const PLANNED: readonly PlannedScenario[] = [
  { name: 'e2e', title: 'End to end: webhook -> run completed -> live update received', unit: 'runs/s', plan: 'webhook in, one-step run, RunUpdate received on a live room' },
  { name: 'wasm-invoke', title: 'WASM custom action invoke latency (hook-runner over gRPC)', unit: 'invokes/s', plan: 'Invoke of an approved module with fuel and memory limits' },
  { name: 'fan-out', title: 'Live fan-out: run updates to many WebSocket subscribers', unit: 'messages/s', plan: 'one room, many subscribers, binary protobuf frames' },
  { name: 'recovery', title: 'Recovery after kill -9: time until unfinished runs resume', unit: 'runs/s', plan: 'SIGKILL under load, restart on the same data dir' },
  { name: 'fairness', title: 'Fairness: a quiet tenant\'s latency while another floods', unit: 'runs/s', plan: 'two tenants, one flooding, round-robin admission' },
];

function plannedScenario(planned: PlannedScenario): Scenario {
  return {
    name: planned.name,
    title: planned.title,
    run: (): Promise<ScenarioReport> =>
      Promise.resolve({
        scenario: planned.name,
        title: planned.title,
        status: 'not_yet_measured',
        unit: planned.unit,
        method: [],
        systems: [
          {
            system: 'sluice',
            label: 'Sluice',
            role: 'subject',
            work: planned.plan,
            status: 'not_yet_measured',
            note: 'not yet measured (a later issue)',
          },
        ],
        ratios: [],
        latencyCurve: [],
        targets: [],
        notes: [],
      }),
  };
}

export const plannedScenarios: readonly Scenario[] = PLANNED.map(plannedScenario);
