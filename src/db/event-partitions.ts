import { CompiledQuery } from 'kysely';
import type { Executor } from './executor.ts';
import { isPostgres } from './dialect.ts';
import { uuidFloor } from '../lib/ids.ts';

/**
 * Daily partitions of `events` (by created_at) and `event_tags` (by event_id, whose UUIDv7
 * prefix is the event's time) on PostgreSQL (migration 017, docs/operations.md "Events
 * partitions"). Each day is `events_pYYYYMMDD` and `event_tags_pYYYYMMDD`, covering
 * [day, day + 1) in UTC; rows outside every day land in `events_default` / `event_tags_default`,
 * so an insert never fails because the scheduler fell behind. SQLite keeps one table.
 */
const DAY = 86_400_000;

/** Days created ahead of today by the scheduler (and by the migration). */
export const DAYS_AHEAD = 3;

const dayStart = (ms: number) => Math.floor(ms / DAY) * DAY;
const suffix = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

async function raw<R = Record<string, unknown>>(db: Executor, text: string, params: unknown[] = []): Promise<R[]> {
  return (await db.executeQuery<R>(CompiledQuery.raw(text, params))).rows as R[];
}

/** The day partitions that exist, as day starts (ms), oldest first. */
export async function listDayPartitions(db: Executor): Promise<number[]> {
  const rows = await raw<{ name: string }>(
    db,
    `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
     join pg_class p on p.oid = i.inhparent join pg_namespace n on n.oid = p.relnamespace
     where p.relname = 'events' and n.nspname = current_schema() and c.relname ~ '^events_p[0-9]{8}$'`,
  );
  return rows
    .map((r) => Date.parse(`${r.name.slice(8, 12)}-${r.name.slice(12, 14)}-${r.name.slice(14, 16)}T00:00:00Z`))
    .sort((a, b) => a - b);
}

/**
 * Creates the partitions of day `ms` if missing. Rows of that day already in the default
 * partitions (the scheduler was stopped for days) are moved into the new ones first, or
 * PostgreSQL would refuse the new partition.
 */
export async function createDay(db: Executor, ms: number): Promise<boolean> {
  const lo = dayStart(ms);
  const hi = lo + DAY;
  const name = suffix(lo);
  const exists = await raw(
    db,
    `select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.relname = $1 and n.nspname = current_schema()`,
    [`events_p${name}`],
  );
  if (exists.length) return false;
  const [from, to] = [isoDay(lo), isoDay(hi)];
  const [idFrom, idTo] = [uuidFloor(lo), uuidFloor(hi)];
  const stray = await raw(db, `select 1 from events_default where created_at >= $1 and created_at < $2 limit 1`, [
    from,
    to,
  ]);
  const strayTags = await raw(db, `select 1 from event_tags_default where event_id >= $1 and event_id < $2 limit 1`, [
    idFrom,
    idTo,
  ]);
  if (stray.length === 0 && strayTags.length === 0) {
    await raw(db, `create table events_p${name} partition of events for values from ('${from}') to ('${to}')`);
    await raw(
      db,
      `create table event_tags_p${name} partition of event_tags for values from ('${idFrom}') to ('${idTo}')`,
    );
    return true;
  }
  // Move the day's rows out of the default partitions, then attach the filled tables.
  await raw(db, `create table events_p${name} (like events including defaults)`);
  await raw(db, `create table event_tags_p${name} (like event_tags including defaults)`);
  await raw(
    db,
    `with moved as (delete from events_default where created_at >= $1 and created_at < $2 returning *)
     insert into events_p${name} select * from moved`,
    [from, to],
  );
  await raw(
    db,
    `with moved as (delete from event_tags_default where event_id >= $1 and event_id < $2 returning *)
     insert into event_tags_p${name} select * from moved`,
    [idFrom, idTo],
  );
  await raw(db, `alter table events attach partition events_p${name} for values from ('${from}') to ('${to}')`);
  await raw(
    db,
    `alter table event_tags attach partition event_tags_p${name} for values from ('${idFrom}') to ('${idTo}')`,
  );
  return true;
}

/** Today's partitions and DAYS_AHEAD days after it (the scheduler's job). Returns how many were created. */
export async function ensurePartitions(db: Executor, now = Date.now()): Promise<number> {
  if (!isPostgres(db)) return 0;
  let created = 0;
  for (let d = 0; d <= DAYS_AHEAD; d++) {
    if (await db.transaction().execute((trx) => createDay(trx, now + d * DAY))) created++;
  }
  return created;
}

/**
 * Drops the day partitions that end at or before `cutoff` and hold no event a webhook may still
 * have to deliver (waiting for fan-out in webhook_outbox, or as new as the oldest event of a
 * queued delivery unit): one catalog change per day instead of deleting its rows one by one.
 * A day that is still needed stays; the row deletion of the retention job takes it over.
 */
export async function dropExpiredPartitions(db: Executor, cutoff: string): Promise<string[]> {
  if (!isPostgres(db)) return [];
  const dropped: string[] = [];
  const limit = Date.parse(cutoff);
  for (const lo of await listDayPartitions(db)) {
    const hi = lo + DAY;
    if (hi > limit) break;
    const name = suffix(lo);
    const done = await db.transaction().execute(async (trx) => {
      // Dropping a partition locks the parent: never queue behind a long query (and every
      // insert behind us); the next run tries again.
      await raw(trx, `set local lock_timeout = '2s'`);
      const busy = await raw(
        trx,
        `select 1 where exists (select 1 from webhook_outbox o join events_p${name} e on e.id = o.event_id)
            or exists (select 1 from webhook_queue q where q.oldest_event_at < $1)`,
        [isoDay(hi)],
      );
      if (busy.length) return false;
      await raw(trx, `drop table events_p${name}`);
      await raw(trx, `drop table if exists event_tags_p${name}`);
      return true;
    });
    if (!done) break;
    dropped.push(isoDay(lo));
  }
  return dropped;
}

/** Whether `events` is partitioned by day (PostgreSQL, migration 017); SQLite keeps one table. */
export function eventsArePartitioned(db: Executor): boolean {
  return isPostgres(db);
}
