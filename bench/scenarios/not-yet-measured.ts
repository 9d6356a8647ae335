// Scenarios the issue names but later issues will build: each reports a "not yet measured" row,
// never a number, so the table shows the whole plan. Replace one by a real Scenario to measure it.

import type { Scenario, ScenarioReport } from '../scenario.ts';

interface PlannedScenario {
  readonly name: string;
  readonly title: string;
  readonly unit: string;
  readonly plan: string;
}

// Empty since fan-out is measured (scenarios/fanout/); the mechanism stays for the next planned row.
const PLANNED: readonly PlannedScenario[] = [];

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
