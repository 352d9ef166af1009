import { type Kysely, PostgresAdapter, sql } from 'kysely';

const DAY = 86_400_000;

/*
 * A migration is frozen: it runs the same SQL on every database it ever meets, whatever the live
 * code becomes. So what it needs of the partition scheme (src/db/event-partitions.ts, which the
 * scheduler uses and may change) is copied here as it was when this migration was written.
 */
const DAYS_AHEAD = 3;
const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
function uuidFloorAt(ms: number): string {
  const hex = ms.toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}

/** The partitions of one day; the default partitions are new and empty here, so no rows move. */
async function createDay(db: Kysely<unknown>, lo: number): Promise<void> {
  const name = isoDay(lo).replaceAll('-', '');
  const [from, to] = [isoDay(lo), isoDay(lo + DAY)];
  const [idFrom, idTo] = [uuidFloorAt(lo), uuidFloorAt(lo + DAY)];
  await sql
    .raw(`create table events_p${name} partition of events for values from ('${from}') to ('${to}')`)
    .execute(db);
  await sql
    .raw(`create table event_tags_p${name} partition of event_tags for values from ('${idFrom}') to ('${idTo}')`)
    .execute(db);
}

/**
 * PostgreSQL: `events` partitioned by day on created_at and `event_tags` by day on event_id (the
 * UUIDv7 time prefix), with a default partition each (docs/operations.md
 * "Events partitions"). Retention then drops a day as one catalog change, and the events API's
 * time window prunes to the days it covers. The primary key becomes (id, created_at): a
 * partitioned table's unique keys must hold the partition key (ids are UUIDv7, unique anyway).
 * Existing rows are copied into the new tables, one partition per day they cover: on a big table
 * this migration takes a while (run it in a quiet hour; docs/operations.md "Upgrades").
 * SQLite: nothing (one table, row deletion).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`alter table events rename to events_unpartitioned`.execute(db);
  await sql`alter table event_tags rename to event_tags_unpartitioned`.execute(db);
  for (const idx of [
    'events_tenant_id',
    'events_tenant_type',
    'events_tenant_recipient',
    'events_tenant_transmission',
    'events_tenant_message',
    'event_tags_event',
  ]) {
    await sql`alter index ${sql.ref(idx)} rename to ${sql.ref(`${idx}_unpartitioned`)}`.execute(db);
  }
  await sql`alter table events_unpartitioned rename constraint events_pkey to events_unpartitioned_pkey`.execute(db);
  await sql`alter table event_tags_unpartitioned rename constraint event_tags_pk to event_tags_unpartitioned_pk`.execute(
    db,
  );
  await sql`create table events (
      tenant_id text not null, id text not null, type text not null, created_at text not null,
      transmission_id text, message_id text, recipient text, mail_type text,
      tags text not null, metadata text not null, data text not null,
      constraint events_pkey primary key (id, created_at)
    ) partition by range (created_at)`.execute(db);
  await sql`create table events_default partition of events default`.execute(db);
  await sql`create index events_tenant_id on events (tenant_id, id)`.execute(db);
  await sql`create index events_tenant_type on events (tenant_id, type, id)`.execute(db);
  await sql`create index events_tenant_recipient on events (tenant_id, recipient, id)`.execute(db);
  await sql`create index events_tenant_transmission on events (tenant_id, transmission_id, id)`.execute(db);
  await sql`create index events_tenant_message on events (tenant_id, message_id, id)`.execute(db);
  await sql`create table event_tags (
      tenant_id text not null, tag text not null, event_id text not null,
      constraint event_tags_pk primary key (tenant_id, tag, event_id)
    ) partition by range (event_id)`.execute(db);
  await sql`create table event_tags_default partition of event_tags default`.execute(db);
  await sql`create index event_tags_event on event_tags (event_id)`.execute(db);

  // One partition per day the existing rows cover, and the days ahead.
  const { rows } = await sql<{ lo: string | null; hi: string | null }>`
    select min(created_at) as lo, max(created_at) as hi from events_unpartitioned`.execute(db);
  const now = Date.now();
  const first = rows[0]?.lo ? Math.min(Date.parse(rows[0].lo), now) : now;
  const last = Math.max(rows[0]?.hi ? Date.parse(rows[0].hi) : now, now) + DAYS_AHEAD * DAY;
  for (let d = Math.floor(first / DAY) * DAY; d <= last; d += DAY) await createDay(db, d);
  await sql`insert into events select tenant_id, id, type, created_at, transmission_id, message_id, recipient, mail_type, tags, metadata, data from events_unpartitioned`.execute(
    db,
  );
  await sql`insert into event_tags select tenant_id, tag, event_id from event_tags_unpartitioned`.execute(db);
  await sql`drop table events_unpartitioned`.execute(db);
  await sql`drop table event_tags_unpartitioned`.execute(db);
  await sql`analyze events`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('017_events_partitions cannot be reverted automatically');
}
