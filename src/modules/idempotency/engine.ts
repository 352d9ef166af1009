import { type Container, every } from '../../container.ts';
import type { Stoppable } from '../../engine.ts';
import { acquireLease } from '../../jobs/lease.ts';

/** Purges expired idempotency keys, on one node at a time (guarded by a lease). */
export function start(c: Container): Stoppable {
  // The lease outlives two intervals, so its holder renews it before anyone else may take it.
  const purgeMs = c.config.idempotencyPurgeSeconds * 1000;
  every(c, purgeMs, 'idempotency-purge', async () => {
    if (await acquireLease(c.database, 'idempotency-purge', c.node.holder, 2 * purgeMs)) {
      const n = await c.idempotency.purgeExpired();
      if (n) c.logger.info({ removed: n }, 'expired idempotency keys purged');
    }
  });
  return { name: 'idempotency-purge', stop: async () => {} };
}
