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
  { name: 'fan-out', title: 'Live fan-out: run updates to many WebSocket subscribers', unit: 'messages/s', plan: 'one room, many subscribers, binary protobuf frames' },
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
