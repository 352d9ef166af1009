import type { Container } from '../../container.ts';
import { acquireLease } from '../../jobs/lease.ts';

/** How often the retention job runs; the lease outlives one run so two nodes never overlap. */
export const EVENT_RETENTION_INTERVAL_MS = 10 * 60_000;
const LEASE_MS = 15 * 60_000;

/**
 * Deletes events older than POSTYARD_EVENT_RETENTION_DAYS (and webhook attempt logs as old) on one
 * node at a time. Events still waiting for a webhook delivery are kept until it ends.
 */
export async function runEventRetention(c: Container, holder: string): Promise<void> {
  if (!(await acquireLease(c.database, 'event-retention', holder, LEASE_MS))) return;
  const removed = await c.events.purgeExpired(c.config.eventRetentionDays);
  if (removed.events || removed.deliveries) c.logger.info(removed, 'expired events and webhook attempts deleted');
}
