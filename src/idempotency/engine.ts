import type { Config } from '../config.ts';
import { acquireLease } from '../db/lease.ts';
import type { Database } from '../db/index.ts';
import type { Stoppable } from '../engine.ts';
import { type ChoreHost, every } from '../jobs/every.ts';
import type { NodeSelf } from '../lib/node-identity.ts';
import type { IdempotencyService } from './idempotency.service.ts';

/** What the purge needs of its node. */
export interface IdempotencyPurgeDeps extends ChoreHost {
  config: Pick<Config, 'idempotencyPurgeSeconds'>;
  database: Database;
  node: NodeSelf;
  idempotency: IdempotencyService;
}

/** Purges expired idempotency keys, on one node at a time (guarded by a lease). */
export function start(c: IdempotencyPurgeDeps): Stoppable {
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
