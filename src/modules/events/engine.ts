import { type Container, every } from '../../container.ts';
import type { Stoppable } from '../../engine.ts';
import { EVENT_RETENTION_INTERVAL_MS, runEventRetention } from './events.retention.ts';

/** Deletes expired events every 10 minutes, on one node at a time (the job takes a lease). */
export function start(c: Container): Stoppable {
  every(c, EVENT_RETENTION_INTERVAL_MS, 'event-retention', () => runEventRetention(c, c.node.holder));
  return { name: 'event-retention', stop: async () => {} };
}
