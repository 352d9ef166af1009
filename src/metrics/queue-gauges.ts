/**
 * Queue depth, sampled when Prometheus scrapes (never on the send path): index-only counts of the
 * waiting states over messages_waiting and of `sending` over messages_leased (migration 020), and
 * the earliest due time (the first entry of each). The answer is kept for a few
 * seconds so several scrapers, or a scrape per node of one database, cost one query per interval.
 * The queue is the shared messages table: every node reports the same numbers (max(), not sum()).
 */
import { Gauge, type Registry } from 'prom-client';
import { runSql } from '../db/dialect.ts';
import type { Database } from '../db/index.ts';
import { CLAIMABLE_STATES, WAITING_SQL } from '../db/message-state.ts';

interface Sample {
  at: number;
  counts: Record<string, number>;
  /** Seconds the earliest due message has been waiting past its due time (0 when none is late). */
  lateSeconds: number;
}

// Literal states (not parameters), as for the claim: the planners then use the partial indexes.
// One row per waiting state (group by: the index predicate verbatim), then one for `sending`.
const COUNTS =
  `select state, count(*) as n from messages where ${WAITING_SQL} group by state ` +
  "union all select 'sending', count(*) from messages where state = 'sending'";
// A lease's end is its row's next_attempt_at: a lease that ran out is a message due since then.
const EARLIEST =
  `select (select min(next_attempt_at) from messages where ${WAITING_SQL}) as waiting, ` +
  "(select min(locked_until) from messages where state = 'sending') as leased";

export function installQueueGauges(registry: Registry, database: Database, cacheMs = 5_000): void {
  let last: Sample | null = null;
  let pending: Promise<Sample> | null = null;
  const sample = async (): Promise<Sample> => {
    if (last && Date.now() - last.at < cacheMs) return last;
    pending ??= (async () => {
      try {
        const rows = await runSql<{ state: string; n: unknown }>(database.db, COUNTS, []);
        const [row] = await runSql<{ waiting: string | null; leased: string | null }>(database.db, EARLIEST, []);
        const counts: Record<string, number> = {};
        for (const s of CLAIMABLE_STATES) counts[s] = 0;
        for (const r of rows) counts[r.state] = Number(r.n);
        const times = [row?.waiting, row?.leased].filter((x): x is string => typeof x === 'string').map(Date.parse);
        const earliest = times.length ? Math.min(...times) : Number.NaN;
        const lateSeconds = Number.isNaN(earliest) ? 0 : Math.max(0, (Date.now() - earliest) / 1000);
        last = { at: Date.now(), counts, lateSeconds };
        return last;
      } finally {
        pending = null;
      }
    })();
    return pending;
  };

  new Gauge({
    name: 'postyard_queue_messages',
    help: 'Messages waiting in the delivery queue by state (queued, deferred, sending); sampled at scrape time',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const s = await sample().catch(() => null);
      // A failed sample leaves the series out rather than reporting a false 0.
      if (!s) return this.reset();
      for (const [state, n] of Object.entries(s.counts)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'postyard_queue_oldest_due_seconds',
    help: 'How long the earliest due message has waited past its due time (0 when the queue keeps up)',
    registers: [registry],
    async collect() {
      const s = await sample().catch(() => null);
      if (!s) return this.reset();
      this.set(s.lateSeconds);
    },
  });
}
