/**
 * Watches which workers hold claimed messages of a tenant, for the two-node pacing tests
 * (connections-across-nodes, override-across-nodes): a node holding claimed mail for a site asks
 * for that site's connection slots, so "both nodes held some at one moment" means both wanted
 * sessions at once, and the sink's count shows whether the limit held for both together. (Which
 * node ends up sending is not the point: a node that gets no slot hands its mail to the node that
 * holds them, src/modules/pacing/slot-wait.ts, so one node may send everything.)
 */
import type { Database } from '../../src/db/index.ts';

export interface ClaimSampler {
  /** Stops sampling; the largest set of workers seen holding the tenant's mail at one moment. */
  stop(): Promise<Set<string>>;
}

export function sampleClaims(database: Database, tenantIds: string[], everyMs = 50): ClaimSampler {
  let running = true;
  let widest = new Set<string>();
  const loop = (async () => {
    while (running) {
      const rows = await database.db
        .selectFrom('messages')
        .select('locked_by')
        .distinct()
        .where('tenant_id', 'in', tenantIds)
        .where('state', '=', 'sending')
        .where('locked_by', 'is not', null)
        .execute();
      const now = new Set(rows.map((r) => r.locked_by as string));
      if (now.size > widest.size) widest = now;
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return widest;
    },
  };
}
