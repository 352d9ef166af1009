/**
 * Watches which workers hold claimed messages of a tenant, for the two-node pacing tests
 * (connections-across-nodes, override-across-nodes): a node holding claimed mail for a site asks
 * for that site's connection slots, so "both nodes held some at one moment" means both wanted
 * sessions at once, and the sink's count shows whether the limit held for both together. (Which
 * node ends up sending is not the point: a node that gets no slot hands its mail to the node that
 * holds them, src/modules/pacing/slot-wait.ts, so one node may send everything.)
 */
import type { Container } from '../../src/container.ts';
import type { Database } from '../../src/db/index.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { startTestWorker, type TestSigningKey } from '../helpers/delivery.ts';

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

/**
 * Starts one delivery worker per node for the two-node pacing tests, the second a moment after
 * the first (as on a loaded CI machine), each holding at most 30 of a tenant's messages at once
 * (TENANT_SHARE of maxInflight 40). Without the cap, a worker claims again at once after a full
 * batch, so the first took all of a tenant's mail before the second's first claim (seen in CI:
 * the second node never held any, and the sampler's precondition failed); with it, the later
 * worker still finds mail waiting while the other sends.
 */
export async function startNodeWorkers(
  nodes: { c: Container; workerId: string }[],
  opts: { signing: TestSigningKey; batchSize: number },
  secondAfterMs = 1_500,
): Promise<DeliveryWorker[]> {
  const started: DeliveryWorker[] = [];
  for (const [i, node] of nodes.entries()) {
    if (i > 0) await new Promise((r) => setTimeout(r, secondAfterMs));
    started.push(startTestWorker(node.c, node.workerId, { ...opts, maxInflight: 40 }));
  }
  return started;
}
