import type { Config } from '../../config.ts';
import type { Database } from '../../db/index.ts';
import { acquireLease } from '../../db/lease.ts';
import type { ChoreHost } from '../../jobs/every.ts';
import type { NodeSelf } from '../../lib/node-identity.ts';
import type { EventsService } from './events.service.ts';

/** How often the retention job runs; the lease outlives one run so two nodes never overlap. */
export const EVENT_RETENTION_INTERVAL_MS = 10 * 60_000;
const LEASE_MS = 15 * 60_000;

/** What the retention job needs of its node. */
export interface EventRetentionDeps extends ChoreHost {
  config: Pick<Config, 'eventRetentionDays'>;
  database: Database;
  node: NodeSelf;
  events: Pick<EventsService, 'purgeExpired'>;
}

/**
 * Deletes events older than POSTYARD_EVENT_RETENTION_DAYS (and webhook attempt logs as old) on one
 * node at a time. Events still waiting for a webhook delivery are kept until it ends.
 */
export async function runEventRetention(c: EventRetentionDeps, holder: string): Promise<void> {
  if (!(await acquireLease(c.database, 'event-retention', holder, LEASE_MS))) return;
  const removed = await c.events.purgeExpired(c.config.eventRetentionDays);
  if (removed.events || removed.deliveries) c.logger.info(removed, 'expired events and webhook attempts deleted');
}
