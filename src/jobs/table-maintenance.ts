import type { Database } from '../db/index.ts';
import { maintainTables, ownMaintenanceNeeded, TABLE_MAINTENANCE_INTERVAL_MS } from '../db/table-maintenance.ts';
import type { Stoppable } from '../engine.ts';
import type { NodeSelf } from '../lib/node-identity.ts';
import { type ChoreHost, every } from './every.ts';

/**
 * Worker role: the table maintenance pass (src/db/table-maintenance.ts) every 10 s, where the
 * database needs it (PostgreSQL with autovacuum off); elsewhere each tick is one cheap check.
 */
export function start(c: ChoreHost & { database: Database; node: NodeSelf }): Stoppable {
  let warned = false;
  every(c, TABLE_MAINTENANCE_INTERVAL_MS, 'table-maintenance', async () => {
    if (!(await ownMaintenanceNeeded(c.database))) return;
    if (!warned) {
      warned = true;
      c.logger.warn(
        'PostgreSQL autovacuum is off: Postyard analyzes and vacuums its own tables (docs/operations.md "PostgreSQL sizing")',
      );
    }
    await maintainTables(c.database, c.node.holder, c.logger);
  });
  return { name: 'table-maintenance', stop: async () => {} };
}
