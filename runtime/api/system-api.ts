// GET /healthz (liveness + ledger readability) and GET /metrics (Prometheus text format).
// Neither needs a key: they expose no tenant data.

import { json, type Route } from '../http/types.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { RuntimeMetrics } from '../metrics.ts';

/** `uptimeMs`: the time since the start (on the monotonic clock: runtime/clock.ts, elapsedSince). */
export function systemRoutes(ledger: Ledger, metrics: RuntimeMetrics, uptimeMs: () => number): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/healthz',
      // A liveness probe must not wait for boot recovery, which can take a while.
      answersWhileHeld: true,
      handler: () => {
        ledger.orgs.get(['__healthz__']);
        return json(200, { status: 'ok', uptime_ms: Math.round(uptimeMs()) });
      },
    },
    {
      method: 'GET',
      pattern: '/metrics',
      answersWhileHeld: true,
      handler: async () => ({
        status: 200,
        text: await metrics.registry.metrics(),
        headers: { 'content-type': metrics.registry.contentType },
      }),
    },
  ];
}
