import { uuidFloor } from '../../lib/ids.ts';
import { type Compilable, type RawBuilder, type SelectQueryBuilder, sql } from 'kysely';
import { eventsArePartitioned } from '../../db/event-partitions.ts';
import type { Executor } from '../../db/executor.ts';
import type { DB, EventsTable } from '../../db/schema.ts';

export interface EventFilter {
  limit: number;
  types: string[];
  recipient?: string;
  transmissionId?: string;
  messageId?: string;
  tag?: string;
  /** Inclusive lower bound on created_at (ISO-8601 UTC). */
  from?: string;
  /** Exclusive upper bound on created_at (ISO-8601 UTC). */
  to?: string;
  /** Keyset: only events with id < beforeId (the last id of the previous page). */
  beforeId?: string;
  /**
   * Only events with id >= sinceId (a uuidFloor), with a matching created_at bound so PostgreSQL
   * prunes the day partitions below it (listEvents' widening search; not an API parameter).
   */
  sinceMs?: number;
}

/**
 * Event ids are UUIDv7, minted right after created_at is read (events.repo.ts), so an id's time
 * prefix is never earlier than its created_at. A time bound can therefore also bound the id, and
 * the id range is what the (tenant_id, <filter>, id) indexes can seek to; without it, a window far
 * in the past would walk every newer event first. The created_at conditions stay as the exact
 * filter. TO_SLACK_MS covers the small gap between reading the clock and minting the ids.
 */
const TO_SLACK_MS = 60_000;

type EventsQuery = SelectQueryBuilder<DB, 'events', EventsTable>;

/** The conditions on `events` of every filter but the tag, the cursor and listEvents' widening. */
function narrow<Q extends EventsQuery>(
  q: Q,
  f: EventFilter,
  types: string[] | undefined,
  idCol: RawBuilder<string>,
): Q {
  let r = q as EventsQuery;
  if (types?.length === 1) r = r.where('events.type', '=', types[0] as string);
  else if (types && types.length > 1) r = r.where('events.type', 'in', types);
  if (f.recipient !== undefined) r = r.where('events.recipient', '=', f.recipient);
  if (f.transmissionId !== undefined) r = r.where('events.transmission_id', '=', f.transmissionId);
  if (f.messageId !== undefined) r = r.where('events.message_id', '=', f.messageId);
  if (f.from !== undefined) {
    r = r.where('events.created_at', '>=', f.from).where(idCol, '>=', uuidFloor(Date.parse(f.from)));
  }
  if (f.to !== undefined) {
    r = r.where('events.created_at', '<', f.to).where(idCol, '<', uuidFloor(Date.parse(f.to) + TO_SLACK_MS));
  }
  return r as Q;
}

/** One newest-first keyset query; `types` undefined = every type. */
function filtered(db: Executor, tenantId: string, f: EventFilter, types: string[] | undefined): EventsQuery {
  // With a tag, the event_tags primary key (tenant_id, tag, event_id) drives the scan and its
  // event_id column carries the ordering and the keyset/time bounds, so the planner can walk that
  // index backwards and stop after `limit` rows.
  // SQLite keeps the table order of a CROSS JOIN (PostgreSQL plans it like any inner join):
  // without it SQLite may walk all the tenant's events and sort them. On PostgreSQL listEvents
  // takes a tag through listTagged instead (the join cannot prune partitions).
  const idCol = f.tag ? sql.ref<string>('event_tags.event_id') : sql.ref<string>('events.id');
  let q = (
    f.tag
      ? db
          .selectFrom('event_tags')
          .crossJoin('events')
          .selectAll('events')
          .whereRef('events.id', '=', 'event_tags.event_id')
          .where('event_tags.tenant_id', '=', tenantId)
          .where('event_tags.tag', '=', f.tag)
      : db.selectFrom('events').selectAll('events')
  ).where('events.tenant_id', '=', tenantId) as EventsQuery;
  q = narrow(q, f, types, idCol);
  if (f.beforeId !== undefined) q = q.where(idCol, '<', f.beforeId);
  if (f.sinceMs !== undefined) {
    // The id bound alone decides (a suffix in id order, so keyset pages stay exact); the
    // created_at bound is implied by it (created_at is at most ms before the id's time) and is
    // there for partition pruning.
    q = q
      .where(idCol, '>=', uuidFloor(f.sinceMs))
      .where('events.created_at', '>=', new Date(f.sinceMs - TO_SLACK_MS).toISOString());
  }
  return q.orderBy(idCol, 'desc').limit(f.limit + 1);
}

/**
 * GET /v1/events: `limit + 1` rows, newest first. Several types with no more selective filter
 * become one index range per type (UNION ALL of per-type top-N, then the top N of those): a
 * single `type IN (...)` would make the planner walk the whole tenant index when the types
 * are rare.
 */
export function listEventsQuery(
  db: Executor,
  tenantId: string,
  f: EventFilter,
): Compilable<EventsTable> & { execute(): Promise<EventsTable[]> } {
  const selective = f.recipient !== undefined || f.transmissionId !== undefined || f.messageId !== undefined || !!f.tag;
  if (f.types.length <= 1 || selective) return filtered(db, tenantId, f, f.types.length ? f.types : undefined);
  const parts = f.types.map((t, i) => db.selectFrom(filtered(db, tenantId, f, [t]).as(`p${i}`)).selectAll());
  let union = parts[0] as (typeof parts)[number];
  for (const p of parts.slice(1)) union = union.unionAll(p);
  return db
    .selectFrom(union.as('u'))
    .selectAll()
    .orderBy('id', 'desc')
    .limit(f.limit + 1) as unknown as Compilable<EventsTable> & { execute(): Promise<EventsTable[]> };
}

/** Windows tried, newest first, before a query without `from` reads every day partition. */
const WIDENING_DAYS = [1, 7];

export async function listEvents(db: Executor, tenantId: string, f: EventFilter): Promise<EventsTable[]> {
  if (!eventsArePartitioned(db)) return listEventsQuery(db, tenantId, f).execute();
  // PostgreSQL: a tag is looked up on its own first (listTagged), never joined across partitions.
  if (f.tag) return listTagged(db, tenantId, f);
  // A page with no lower time bound would plan and probe every day's index (one partition per
  // day, migration 017). Most pages of an unselective filter are filled by the newest day or week
  // (before the cursor), so try those first and read every day only when they hold less than a
  // page. A recipient, transmission or message has few events: its index finds them in every
  // day at once, and the narrower tries would only add statements (docs/benchmarks.md "Events at
  // 10 million on PostgreSQL").
  const selective = f.recipient !== undefined || f.transmissionId !== undefined || f.messageId !== undefined;
  if (f.from === undefined && !selective) {
    const top = f.beforeId !== undefined ? uuidTimeMs(f.beforeId) : Date.now();
    const end = f.to !== undefined ? Math.min(top, Date.parse(f.to) + TO_SLACK_MS) : top;
    if (Number.isFinite(end)) {
      for (const days of WIDENING_DAYS) {
        const rows = await listEventsQuery(db, tenantId, { ...f, sinceMs: end - days * 86_400_000 }).execute();
        if (rows.length > f.limit) return rows;
      }
    }
  }
  return listEventsQuery(db, tenantId, f).execute();
}

/** Tag ids read per step of listTagged when other filters may drop some of their events. */
const TAG_BATCH_MAX = 5000;

/**
 * The tag filter on PostgreSQL, in two statements per step instead of one join. `event_tags` is
 * partitioned by event id and `events` by created_at, so a join cannot prune `events` per tag
 * row: its plan held every day of both tables (8-38 ms to plan at 10 million events) and each
 * tag row probed every day's index. Instead: the newest tag rows (one table, its primary key
 * backwards), then their events by id with a created_at range taken from the ids' UUIDv7 time
 * (created_at is read just before the id is minted, TO_SLACK_MS), which prunes to the days the
 * page covers. Other filters (type, recipient, ...) may drop events: then the next, bigger batch
 * of tag rows, until the page is full or the tag has no more rows.
 */
async function listTagged(db: Executor, tenantId: string, f: EventFilter): Promise<EventsTable[]> {
  const others =
    f.types.length > 0 || f.recipient !== undefined || f.transmissionId !== undefined || f.messageId !== undefined;
  const out: EventsTable[] = [];
  let before = f.beforeId;
  let batch = f.limit + 1;
  const tagIds = async (sinceMs?: number) => {
    let t = db
      .selectFrom('event_tags')
      .select('event_id')
      .where('tenant_id', '=', tenantId)
      .where('tag', '=', f.tag as string);
    if (f.from !== undefined) t = t.where('event_id', '>=', uuidFloor(Date.parse(f.from)));
    if (sinceMs !== undefined) t = t.where('event_id', '>=', uuidFloor(sinceMs));
    if (f.to !== undefined) t = t.where('event_id', '<', uuidFloor(Date.parse(f.to) + TO_SLACK_MS));
    if (before !== undefined) t = t.where('event_id', '<', before);
    return (await t.orderBy('event_id', 'desc').limit(batch).execute()).map((r) => r.event_id);
  };
  // Without `from`, the newest day (before the cursor) first: a common tag fills the batch
  // there, planning over one day's partitions instead of all of them (as listEvents widens).
  const top = before !== undefined ? uuidTimeMs(before) : Date.now();
  const end = f.to !== undefined ? Math.min(top, Date.parse(f.to) + TO_SLACK_MS) : top;
  let newestDay = f.from === undefined && Number.isFinite(end);
  for (;;) {
    let ids = newestDay ? await tagIds(end - 86_400_000) : [];
    if (ids.length < batch) ids = await tagIds();
    newestDay = false;
    if (ids.length === 0) break;
    const times = ids.map(uuidTimeMs).filter(Number.isFinite);
    let q = db
      .selectFrom('events')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where(sql<boolean>`id = any(${ids}::text[])`);
    if (times.length === ids.length) {
      q = q
        .where('created_at', '>=', new Date(Math.min(...times) - TO_SLACK_MS).toISOString())
        .where('created_at', '<=', new Date(Math.max(...times) + TO_SLACK_MS).toISOString());
    }
    q = narrow(q, f, f.types.length ? f.types : undefined, sql.ref<string>('events.id'));
    out.push(...(await q.orderBy('id', 'desc').execute()));
    if (out.length > f.limit || ids.length < batch) break;
    before = ids[ids.length - 1];
    if (others) batch = Math.min(batch * 4, TAG_BATCH_MAX);
  }
  return out.slice(0, f.limit + 1);
}

/** The millisecond time of a UUIDv7 text (NaN when it is not one). */
function uuidTimeMs(id: string): number {
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

/**
 * Up to `chunk` ids of events created before `cutoff` that no webhook may still have to deliver:
 * not waiting for fan-out (webhook_outbox), and not as new as the oldest event of a delivery
 * unit of its tenant still queued (units hold their event ids in JSON, so the check is by time;
 * it is conservative and ends with the unit, within the ~28 h of the retry schedule).
 */
export async function expiredEventIds(db: Executor, cutoff: string, chunk: number): Promise<string[]> {
  const rows = await db
    .selectFrom('events as e')
    .select('e.id')
    // The primary key range (migration 016 dropped the created_at index); created_at stays the
    // exact test. Ids are UUIDv7 minted after created_at was read: see uuidFloor above.
    .where('e.id', '<', uuidFloor(Date.parse(cutoff)))
    .where('e.created_at', '<', cutoff)
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('webhook_outbox as o').select('o.event_id').whereRef('o.event_id', '=', 'e.id'))),
    )
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('webhook_queue as q')
            .select('q.id')
            .whereRef('q.tenant_id', '=', 'e.tenant_id')
            .whereRef('q.oldest_event_at', '<=', 'e.created_at'),
        ),
      ),
    )
    .limit(chunk)
    .execute();
  return rows.map((r) => r.id);
}

export async function deleteEvents(db: Executor, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.deleteFrom('event_tags').where('event_id', 'in', ids).execute();
  await db.deleteFrom('events').where('id', 'in', ids).execute();
}
