import { insertMany } from '../../db/batch.ts';
import { runSql } from '../../db/dialect.ts';
import { commitWithoutFlush, refreshStatistics } from '../../db/tuning.ts';
import type { Executor } from '../../db/executor.ts';
import type { Database } from '../../db/index.ts';
import type { EventsTable, WebhookQueueTable } from '../../db/schema.ts';
import { newId } from '../../lib/ids.ts';
import { SQL } from './queue.sql.ts';

/**
 * The dispatcher's database work. On PostgreSQL every claim uses FOR UPDATE SKIP LOCKED, so
 * nodes never wait on each other's rows; on SQLite there is one writer, so the same statements
 * are simply serialized. A claim also writes a lease (locked_until/locked_by): a node that dies
 * mid-delivery leaves units that become claimable again when the lease runs out (at least once).
 */

const ROWS_PER_STATEMENT = 1000;

/**
 * Events per delivery unit of a single-policy webhook (still one POST per event). One unit row
 * written, claimed and deleted per 16 events instead of per event: those three row writes were
 * the largest database cost of single delivery. A unit whose webhook fails part-way is split
 * (jobs.ts finishUnit), so no event is attempted, or waits, for another's sake.
 */
export const SINGLE_UNIT_EVENTS = 16;

/**
 * PostgreSQL: commit without waiting for the WAL flush. Every write of the dispatcher is safe
 * to lose in a crash (a lost claim expires, a lost fan-out or outcome is redone, so an event is
 * at worst delivered twice), and waiting for an fsync per claim would cap throughput at the
 * disk's flush rate. The API's own commits (accepting mail) keep full durability.
 */
export async function relaxed(trx: Executor): Promise<void> {
  await commitWithoutFlush(trx);
}

/** A subscribed webhook as fan-out needs it. */
export interface Route {
  id: string;
  policy: 'single' | 'batch';
  batchMaxSize: number;
}
export type Router = (tenantId: string, type: string) => readonly Route[];

/** What fan-out reads of an event: routing columns and its JSON. */
type RoutedEvent = Pick<EventsTable, 'id' | 'tenant_id' | 'type' | 'created_at'> & { body: string };

/**
 * Claims up to `limit` outbox rows of events created before `createdBefore` and turns them into
 * delivery units of every subscribed webhook (up to SINGLE_UNIT_EVENTS events per unit, or up to
 * batch_max_size with the batch policy), deleting the outbox rows in the same transaction: a crash keeps both or
 * neither. Returns how many outbox rows were consumed, how many events each webhook got, and the
 * routed events themselves (read whole here, so the dispatcher need not read them again).
 */
export async function fanOut(
  database: Database,
  limit: number,
  route: Router,
  now: string,
  createdBefore: string,
): Promise<{
  claimed: number;
  queued: Map<string, number>;
  routed: { id: string; body: string; webhookIds: string[] }[];
}> {
  return database.db.transaction().execute(async (trx) => {
    await relaxed(trx);
    // Two plain statements rather than a join: with a join the planner may merge-scan the
    // events index from its start on every round (the outbox is consumed from the front).
    const outbox = await runSql<{ event_id: string; tenant_id: string }>(trx, SQL.outboxFront, [limit]);
    const queued = new Map<string, number>();
    const routed: { id: string; body: string; webhookIds: string[] }[] = [];
    if (outbox.length === 0) return { claimed: 0, queued, routed };
    const events = new Map<string, RoutedEvent>();
    const found = await runSql<RoutedEvent>(trx, SQL.eventsToRoute, [outbox.map((r) => r.event_id)]);
    for (const e of found) events.set(e.id, e);
    // Only events the routing table is known to be current for (see WebhookRegistry.validAt);
    // the others stay in the outbox for a later round. A missing event (tenant deleted) is dropped.
    const rows = outbox.filter((r) => (events.get(r.event_id)?.created_at ?? '') < createdBefore);
    if (rows.length === 0) return { claimed: 0, queued, routed };
    const open = new Map<string, WebhookQueueTable & { ids: string[] }>();
    const units: (WebhookQueueTable & { ids: string[] })[] = [];
    for (const r of rows) {
      const ev = events.get(r.event_id);
      if (!ev) continue;
      const routes = route(r.tenant_id, ev.type);
      if (routes.length)
        routed.push({
          id: ev.id,
          body: ev.body,
          webhookIds: routes.map((w) => w.id),
        });
      for (const w of routes) {
        let unit = open.get(w.id);
        if (!unit || unit.ids.length >= (w.policy === 'batch' ? w.batchMaxSize : SINGLE_UNIT_EVENTS)) {
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
          open.set(w.id, unit);
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
    await runSql(trx, SQL.deleteOutbox, [rows.map((r) => r.event_id)]);
    return { claimed: rows.length, queued, routed };
  });
}

/** Due, unclaimed units of one webhook, oldest first, without claiming them (batch sizing). */
export async function peekDue(database: Database, webhookId: string, limit: number, now: string) {
  return runSql<{ id: string; event_count: number; next_attempt_at: string }>(database.db, SQL.peekDue, [
    webhookId,
    now,
    limit,
  ]);
}

export interface ClaimedUnit {
  id: string;
  event_ids: string;
  attempts: number;
  tenant_id: string;
  oldest_event_at: string;
}

export interface Lease {
  now: string;
  until: string;
  holder: string;
}

/**
 * Claims units of one webhook: the `limit` oldest due ones, or exactly `ids` (after peekDue).
 * A claim writes the lease and moves next_attempt_at to its end (see SQL.claimOldest).
 */
export async function claimUnits(
  database: Database,
  webhookId: string,
  pick: { limit: number } | { ids: string[] },
  lease: Lease,
): Promise<ClaimedUnit[]> {
  // A single statement on both backends (on PostgreSQL it relaxes its own commit).
  return 'ids' in pick
    ? runSql<ClaimedUnit>(database.db, SQL.claimIds, [webhookId, lease.now, pick.ids, lease.until, lease.holder])
    : runSql<ClaimedUnit>(database.db, SQL.claimOldest, [webhookId, lease.now, pick.limit, lease.until, lease.holder]);
}

/**
 * Gives back units claimed by `holder` that were never attempted (their lane stopped sending
 * before it got to them): due again at once, with no attempt counted.
 */
export async function releaseUnits(
  database: Database,
  webhookId: string,
  holder: string,
  ids: string[],
  now: string,
): Promise<void> {
  if (ids.length === 0) return;
  await runSql(database.db, SQL.releaseUnits, [webhookId, holder, now, ids]);
}

/** Whole event rows by id (events not in the dispatcher's cache). */
export async function loadEvents(database: Database, ids: readonly string[]): Promise<EventsTable[]> {
  const out: EventsTable[] = [];
  for (let i = 0; i < ids.length; i += ROWS_PER_STATEMENT) {
    out.push(...(await runSql<EventsTable>(database.db, SQL.eventsById, [ids.slice(i, i + ROWS_PER_STATEMENT)])));
  }
  return out;
}

/** Gives back the leases this node still holds (graceful stop): another node may take them at once. */
export async function releaseClaims(db: Executor, holder: string, now: string): Promise<void> {
  await runSql(db, SQL.releaseHolder, [holder, now]);
}

/**
 * PostgreSQL: refreshes the queue's statistics. Called by the dispatcher after a burst of
 * fan-out, before autovacuum would notice: with statistics from a near-empty table the planner
 * sorts the whole backlog for every claim instead of reading the first rows of the index.
 */
export async function analyzeQueue(database: Database): Promise<void> {
  await refreshStatistics(database.db, 'webhook_queue');
}
