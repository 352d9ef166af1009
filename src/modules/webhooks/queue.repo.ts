import { type ExpressionBuilder, sql } from 'kysely';
import { insertMany } from '../../db/batch.ts';
import type { Executor } from '../../db/executor.ts';
import type { Database } from '../../db/index.ts';
import type { DB, EventsTable, WebhookDeliveriesTable, WebhookQueueTable } from '../../db/schema.ts';
import { newId } from '../../lib/ids.ts';
import { disableWebhook } from './webhooks.repo.ts';

/**
 * The dispatcher's database work. On PostgreSQL every claim uses FOR UPDATE SKIP LOCKED, so
 * nodes never wait on each other's rows; on SQLite there is one writer, so the same statements
 * are simply serialized. A claim also writes a lease (locked_until/locked_by): a node that dies
 * mid-delivery leaves units that become claimable again when the lease runs out (at least once).
 */

const ROWS_PER_STATEMENT = 1000;

/**
 * PostgreSQL: commit without waiting for the WAL flush. Every write of the dispatcher is safe
 * to lose in a crash (a lost claim expires, a lost fan-out or outcome is redone, so an event is
 * at worst delivered twice), and waiting for an fsync per claim would cap throughput at the
 * disk's flush rate. The API's own commits (accepting mail) keep full durability.
 */
async function relaxed(trx: Executor, database: Database): Promise<void> {
  if (database.dialect === 'postgres') await sql`set local synchronous_commit = off`.execute(trx);
}

/** A subscribed webhook as fan-out needs it. */
export interface Route {
  id: string;
  policy: 'single' | 'batch';
  batchMaxSize: number;
}
export type Router = (tenantId: string, type: string) => readonly Route[];

/**
 * Claims up to `limit` outbox rows of events created before `createdBefore` and turns them into
 * delivery units of every subscribed webhook (one event per unit, or up to batch_max_size with
 * the batch policy), deleting the outbox rows in the same transaction: a crash keeps both or
 * neither. Returns how many outbox rows were consumed and how many events each webhook got.
 */
export async function fanOut(
  database: Database,
  limit: number,
  route: Router,
  now: string,
  createdBefore: string,
): Promise<{ claimed: number; queued: Map<string, number> }> {
  return database.db.transaction().execute(async (trx) => {
    await relaxed(trx, database);
    // Two plain statements rather than a join: with a join the planner may merge-scan the
    // events index from its start on every round (the outbox is consumed from the front).
    let q = trx.selectFrom('webhook_outbox').select(['event_id', 'tenant_id']).orderBy('event_id').limit(limit);
    if (database.dialect === 'postgres') q = q.forUpdate().skipLocked();
    const outbox = await q.execute();
    const queued = new Map<string, number>();
    if (outbox.length === 0) return { claimed: 0, queued };
    const events = new Map<string, { type: string; created_at: string }>();
    const found = await trx
      .selectFrom('events')
      .select(['id', 'type', 'created_at'])
      .where(
        'id',
        'in',
        outbox.map((r) => r.event_id),
      )
      .execute();
    for (const e of found) events.set(e.id, e);
    // Only events the routing table is known to be current for (see WebhookRegistry.validAt);
    // the others stay in the outbox for a later round. A missing event (tenant deleted) is dropped.
    const rows = outbox.filter((r) => (events.get(r.event_id)?.created_at ?? '') < createdBefore);
    if (rows.length === 0) return { claimed: 0, queued };
    const open = new Map<string, WebhookQueueTable & { ids: string[] }>();
    const units: (WebhookQueueTable & { ids: string[] })[] = [];
    for (const r of rows) {
      const ev = events.get(r.event_id);
      if (!ev) continue;
      for (const w of route(r.tenant_id, ev.type)) {
        let unit = w.policy === 'batch' ? open.get(w.id) : undefined;
        if (!unit || unit.ids.length >= w.batchMaxSize) {
          unit = {
            webhook_id: w.id,
            id: newId(),
            tenant_id: r.tenant_id,
            event_ids: '',
            event_count: 0,
            oldest_event_at: ev.created_at,
            attempts: 0,
            next_attempt_at: now,
            locked_until: null,
            locked_by: null,
            created_at: now,
            ids: [],
          };
          units.push(unit);
          if (w.policy === 'batch') open.set(w.id, unit);
        }
        unit.ids.push(r.event_id);
        if (ev.created_at < unit.oldest_event_at) unit.oldest_event_at = ev.created_at;
        queued.set(w.id, (queued.get(w.id) ?? 0) + 1);
      }
    }
    await insertMany(
      trx,
      'webhook_queue',
      units.map(({ ids, ...u }) => ({ ...u, event_ids: JSON.stringify(ids), event_count: ids.length })),
    );
    const ids = rows.map((r) => r.event_id);
    for (let i = 0; i < ids.length; i += ROWS_PER_STATEMENT) {
      await trx
        .deleteFrom('webhook_outbox')
        .where('event_id', 'in', ids.slice(i, i + ROWS_PER_STATEMENT))
        .execute();
    }
    return { claimed: rows.length, queued };
  });
}

function unlocked(now: string) {
  return (eb: ExpressionBuilder<DB, 'webhook_queue'>) =>
    eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]);
}

/** Due, unclaimed units of one webhook, oldest first, without claiming them (batch sizing). */
export async function peekDue(db: Executor, webhookId: string, limit: number, now: string) {
  return db
    .selectFrom('webhook_queue')
    .select(['id', 'event_count', 'next_attempt_at'])
    .where('webhook_id', '=', webhookId)
    .where('next_attempt_at', '<=', now)
    .where(unlocked(now))
    .orderBy('next_attempt_at')
    .limit(limit)
    .execute();
}

export interface ClaimedUnit {
  id: string;
  event_ids: string;
  attempts: number;
}

export interface Lease {
  now: string;
  until: string;
  holder: string;
}

/**
 * Claims units of one webhook: the `limit` oldest due ones, or exactly `ids` (after peekDue).
 * On PostgreSQL the candidates are picked in a MATERIALIZED CTE with SKIP LOCKED: as a plain
 * IN (subquery) the subquery may run more than once and pick other rows each time.
 */
export async function claimUnits(
  database: Database,
  webhookId: string,
  pick: { limit: number } | { ids: string[] },
  lease: Lease,
): Promise<ClaimedUnit[]> {
  const run = (db: Executor) => {
    const base = db
      .with(
        (cte) => cte('due').materialized(),
        (qb) => {
          let due = qb
            .selectFrom('webhook_queue')
            .select('id')
            .where('webhook_id', '=', webhookId)
            .where(unlocked(lease.now));
          due =
            'ids' in pick
              ? due.where('id', 'in', pick.ids)
              : due.where('next_attempt_at', '<=', lease.now).orderBy('next_attempt_at').limit(pick.limit);
          return database.dialect === 'postgres' ? due.forUpdate().skipLocked() : due;
        },
      )
      .updateTable('webhook_queue')
      .set({ locked_until: lease.until, locked_by: lease.holder })
      .where('webhook_id', '=', webhookId)
      .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
      .where(unlocked(lease.now)); // re-checked if PostgreSQL re-evaluates a row changed meanwhile
    return base.returning(['id', 'event_ids', 'attempts']).execute();
  };
  if (database.dialect !== 'postgres') return run(database.db);
  return database.db.transaction().execute(async (trx) => {
    await relaxed(trx, database);
    return run(trx);
  });
}

export async function loadEvents(db: Executor, ids: readonly string[]): Promise<Map<string, EventsTable>> {
  const out = new Map<string, EventsTable>();
  for (let i = 0; i < ids.length; i += ROWS_PER_STATEMENT) {
    const rows = await db
      .selectFrom('events')
      .selectAll()
      .where('id', 'in', ids.slice(i, i + ROWS_PER_STATEMENT))
      .execute();
    for (const r of rows) out.set(r.id, r);
  }
  return out;
}

/** The database effect of one finished unit, or of one POST on a webhook's failure tracking. */
export interface CompletionWrite {
  webhookId: string;
  /** A finished unit: removed (delivered, given up, gone) or kept for another attempt. */
  unit?: { id: string; retry: { eventIds: string[]; attempts: number; nextAt: string } | null };
  /** Attempt log entry of a POST. */
  log?: WebhookDeliveriesTable;
  /** Outcome of a POST for failure tracking; absent for unit-only writes. */
  ok?: boolean;
  gone?: boolean;
  at: string;
}

export interface DisabledWebhook {
  id: string;
  reason: string;
}

/**
 * Applies a buffer of completions in one transaction: units, the attempt log, and each
 * webhook's failure run (its start is kept until a success; `disableBefore` is the start time
 * from which a run counts as five days of nothing but failures).
 */
export async function applyCompletions(
  database: Database,
  writes: CompletionWrite[],
  disableBefore: string,
): Promise<DisabledWebhook[]> {
  const disabled: DisabledWebhook[] = [];
  // One DELETE per webhook for the whole buffer, whatever the number of units.
  const removals = new Map<string, string[]>();
  for (const w of writes) {
    if (!w.unit || w.unit.retry) continue;
    const list = removals.get(w.webhookId);
    if (list) list.push(w.unit.id);
    else removals.set(w.webhookId, [w.unit.id]);
  }
  await database.db.transaction().execute(async (trx) => {
    await relaxed(trx, database);
    for (const [webhookId, ids] of removals) {
      for (let i = 0; i < ids.length; i += ROWS_PER_STATEMENT) {
        await trx
          .deleteFrom('webhook_queue')
          .where('webhook_id', '=', webhookId)
          .where('id', 'in', ids.slice(i, i + ROWS_PER_STATEMENT))
          .execute();
      }
    }
    const byWebhook = new Map<string, { lastOk: boolean; failSince: string | null; at: string; gone: boolean }>();
    for (const w of writes) {
      const retry = w.unit?.retry;
      if (w.unit && retry) {
        await trx
          .updateTable('webhook_queue')
          .set({
            event_ids: JSON.stringify(retry.eventIds),
            event_count: retry.eventIds.length,
            attempts: retry.attempts,
            next_attempt_at: retry.nextAt,
            locked_until: null,
            locked_by: null,
          })
          .where('webhook_id', '=', w.webhookId)
          .where('id', '=', w.unit.id)
          .execute();
      }
      if (w.ok === undefined) continue;
      const s = byWebhook.get(w.webhookId) ?? { lastOk: w.ok, failSince: null, at: w.at, gone: false };
      if (w.ok) Object.assign(s, { lastOk: true, failSince: null, at: w.at });
      else Object.assign(s, { lastOk: false, failSince: s.failSince ?? w.at, at: w.at, gone: s.gone || !!w.gone });
      byWebhook.set(w.webhookId, s);
    }
    await insertMany(
      trx,
      'webhook_deliveries',
      writes.flatMap((w) => (w.log ? [w.log] : [])),
    );
    // In id order: nodes flushing outcomes of the same webhooks at once must lock the webhooks
    // rows in one order, else PostgreSQL detects a deadlock (seen in test/cluster) and the flush
    // is retried after a wasted second.
    const ordered = [...byWebhook].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    for (const [id, s] of ordered) {
      if (s.lastOk) {
        await trx
          .updateTable('webhooks')
          .set({ failing_since: null, last_success_at: s.at })
          .where('id', '=', id)
          .execute();
        continue;
      }
      await trx
        .updateTable('webhooks')
        .set((eb) => ({ failing_since: eb.fn.coalesce('failing_since', eb.val(s.failSince)), last_failure_at: s.at }))
        .where('id', '=', id)
        .execute();
      if (s.gone) {
        const reason = 'the endpoint answered 410 Gone';
        if (await disableWebhook(trx, id, reason, s.at)) disabled.push({ id, reason });
        continue;
      }
      const row = await trx.selectFrom('webhooks').select('failing_since').where('id', '=', id).executeTakeFirst();
      if (row?.failing_since && row.failing_since <= disableBefore) {
        const reason = 'every delivery attempt failed for 5 days';
        if (await disableWebhook(trx, id, reason, s.at)) disabled.push({ id, reason });
      }
    }
  });
  return disabled;
}

/** Gives back the leases this node still holds (graceful stop): another node may take them at once. */
export async function releaseClaims(db: Executor, holder: string): Promise<void> {
  await db
    .updateTable('webhook_queue')
    .set({ locked_until: null, locked_by: null })
    .where('locked_by', '=', holder)
    .execute();
}

/**
 * PostgreSQL: refreshes the queue's statistics. Called by the dispatcher after a burst of
 * fan-out, before autovacuum would notice: with statistics from a near-empty table the planner
 * sorts the whole backlog for every claim instead of reading the first rows of the index.
 */
export async function analyzeQueue(database: Database): Promise<void> {
  if (database.dialect === 'postgres') await sql`analyze webhook_queue`.execute(database.db);
}
