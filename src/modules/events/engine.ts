import type { Stoppable } from '../../engine.ts';
import { every } from '../../jobs/every.ts';
import { EVENT_RETENTION_INTERVAL_MS, type EventRetentionDeps, runEventRetention } from './events.retention.ts';

/** Deletes expired events every 10 minutes, on one node at a time (the job takes a lease). */
export function start(c: EventRetentionDeps): Stoppable {
  every(c, EVENT_RETENTION_INTERVAL_MS, 'event-retention', () => runEventRetention(c, c.node.holder));
  return { name: 'event-retention', stop: async () => {} };
}
