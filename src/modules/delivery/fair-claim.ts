import { runSql } from '../../db/dialect.ts';
import type { Executor } from '../../db/executor.ts';
import type { Database } from '../../db/index.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { isoAt } from '../../lib/clock.ts';
import { messageRows } from '../outcomes/packed-rows.ts';
import { ANY_DUE, NEXT_TENANTS, TAKE_EXPIRED, TAKE_FAIR } from '../outcomes/queue.sql.ts';

/**
 * Fair claims (docs/pacing.md "Fairness"). The old claim took the n earliest due rows
 * of the whole queue, so a tenant that queued 200,000 marketing messages held back everyone's
 * password resets until they had gone out. A claim now serves tenants in turn:
 *
 * 1. The next TENANTS_PER_CLAIM tenants (fewer if the batch is smaller: one per message) with
 *    waiting work after this worker's cursor, found by a skip scan of messages_waiting_fair
 *    (tenant_id, priority, next_attempt_at), queued and deferred rows only (migration 020): one
 *    index probe per tenant, whatever their backlogs.
 * 2. From each, up to its share of the batch, transactional (priority 0) before marketing, each
 *    in due order: at most two short index ranges per tenant.
 * 3. Those rows are taken with the lease, re-checked (still waiting and due) so two workers that
 *    picked the same rows cannot both take one: on PostgreSQL under FOR UPDATE SKIP LOCKED, on
 *    SQLite under its single writer lock. Steps 2 and 3 are one statement (TAKE_FAIR: the
 *    claim's statements are in src/modules/outcomes/queue.sql.ts with the queue's others).
 *
 * Before all that, one probe of messages_leased takes over leases that ran out (TAKE_EXPIRED; at
 * most once a second per claimer unless the last probe filled the batch).
 * A claimed row leaves the waiting indexes and enters messages_leased, where one claim's rows are
 * neighbours: that is what makes a claim cheap (migration 020, docs/benchmarks.md "Fair claims").
 *
 * The cursor wraps around after the last tenant, so every tenant with due work is reached within
 * ceil(tenants / tenants walked per claim) claims from the first tenant (one more from a cursor
 * mid-way: the claim that reaches the last tenant walks fewer; test/pacing/fair-claim.test.ts). Each worker starts its cursor at a random tenant id so
 * that workers on several nodes do not all contend for the same heads. Tenants the worker already
 * holds its share of (`skip`) are passed over, so one tenant cannot fill the worker's memory.
 */
export const TENANTS_PER_CLAIM = 32;

/**
 * Walks one claim may make past tenants with nothing due (8 x 32 = 256 tenants): bounds what a
 * claim costs when the only due mail is of tenants in `skip` (the worker then polls again).
 */
const MAX_WALKS_PER_CLAIM = 8;

/**
 * How often one claimer probes for leases that ran out. Leases last minutes (the worker's are
 * 300 s), so once a second loses nothing and spares a statement (on PostgreSQL a round trip) on
 * all the other claims; a probe that filled the batch is repeated on the next claim.
 */
const EXPIRED_PROBE_MS = 1_000;

/** Runs TAKE_FAIR: SQLite's text returns its rows packed, PostgreSQL's as they are. */
async function takeFair(db: Executor, params: readonly unknown[]): Promise<MessagesTable[]> {
  return messageRows(await runSql<MessagesTable | { packed: string }>(db, TAKE_FAIR, params));
}

export class FairClaimer {
  /** The last tenant served; the next claim starts after it. */
  private cursor: string;
  /** When this claimer last probed for expired leases and found fewer than a batch. */
  private expiredProbedAt = Number.NEGATIVE_INFINITY;

  constructor(start = '') {
    this.cursor = start;
  }

  /**
   * Claims up to `limit` due messages, spread over the next tenants in turn, with a lease of
   * `leaseMs`. `skip`: tenants this worker holds enough of already.
   */
  async claim(
    database: Database,
    workerId: string,
    limit: number,
    leaseMs: number,
    skip: ReadonlySet<string> = new Set(),
    nowMs: number = Date.now(),
  ): Promise<MessagesTable[]> {
    const db = database.db;
    const now = isoAt(nowMs);
    const until = isoAt(nowMs + leaseMs);
    // At most one tenant per message of the batch: with 32 tenants walked and a batch of 10, the
    // cursor moved past 22 tenants that got nothing (and with fewer than 32 tenants pending, the
    // walk wrapped and started again at the first: the others never got a turn).
    const walk = Math.max(1, Math.min(TENANTS_PER_CLAIM, limit));
    // The tenants walked may have nothing due (their waiting mail is due later): the
    // claim then walks on, while some message is due at all, up to one turn of the tenants or
    // MAX_WALKS_PER_CLAIM walks.
    // Before, it returned nothing and the worker slept its poll interval per 32 such tenants
    // before reaching one that had mail due.
    // Leases that ran out first (rare: a worker died or a send outlived its lease).
    if (nowMs - this.expiredProbedAt >= EXPIRED_PROBE_MS || nowMs < this.expiredProbedAt) {
      const expired = await runSql<MessagesTable>(db, TAKE_EXPIRED, [until, workerId, now, limit, [...skip]]);
      if (expired.length < limit) this.expiredProbedAt = nowMs;
      if (expired.length > 0) return expired;
    }
    const began = this.cursor;
    let turned = false;
    let checked = false;
    for (let walks = 0; walks < MAX_WALKS_PER_CLAIM; walks++) {
      const rows = await runSql<{ tenant_id: string }>(db, NEXT_TENANTS, [this.cursor, walk]);
      // Fewer than asked: the walk reached the last tenant, the next one starts from the first.
      const wrapped = rows.length < walk;
      this.cursor = wrapped ? '' : (rows.at(-1)?.tenant_id ?? '');
      const tenants = rows.map((r) => r.tenant_id).filter((t) => !skip.has(t));
      if (tenants.length > 0) {
        // Rounded down: every tenant walked gets its full share (the cursor moves past all of
        // them); rounded up, the batch filled before the last few, which the cursor then skipped.
        const share = Math.max(1, Math.floor(limit / tenants.length));
        const got = await takeFair(db, [until, workerId, now, tenants, share, limit]);
        if (got.length > 0) return got;
      }
      // A turn is over once the walk has wrapped and come back to where this claim began (the
      // comparison is only a bound: MAX_WALKS_PER_CLAIM caps it anyway).
      if (wrapped) {
        if (began === '' || turned) return [];
        turned = true;
      } else if (turned && (rows.at(-1)?.tenant_id ?? '') >= began) return [];
      if (!checked) {
        // One index probe: with nothing due anywhere, walking on would only cost (an idle queue
        // full of later retries is polled every few hundred milliseconds).
        const due = await runSql<{ id: string }>(db, ANY_DUE, [now]);
        if (due.length === 0) return [];
        checked = true;
      }
    }
    return [];
  }
}
