/**
 * node --import tsx bench/events-explain.ts — the plan of every GET /v1/events filter, on SQLite and
 * (with BENCH_DATABASE_URL) PostgreSQL, over BENCH_EVENTS generated events (default 300,000; two
 * tenants, 30 days, generated in SQL), with each query's p50/p99 over 200 runs. Shows which index
 * each filter uses (docs/operations.md "Events indexes"); an index no filter uses has no reason to
 * cost every accept a write.
 *
 * BENCH_EVENTS_DB=<url of a database filled by bench/events-partitions.ts with BENCH_KEEP_DB>: no
 * generation; for each filter of that bench, the statements GET /v1/events issues (listEvents,
 * with its widening windows) are captured and shown with EXPLAIN (ANALYZE, BUFFERS), and
 * listEvents is timed end to end (p50/p99 over BENCH_RUNS runs, default 200).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery, type KyselyPlugin, type RootOperationNode, sql } from 'kysely';
import { createHash } from 'node:crypto';
import { type Database, migrateToLatest, openDatabase } from '../src/db/index.ts';
import { type EventFilter, listEvents, listEventsQuery } from '../src/modules/events/events.query.ts';
import { createDay } from '../src/db/event-partitions.ts';
import { freshPgDatabase } from './lib-pg.ts';

const N = Number(process.env.BENCH_EVENTS ?? 300_000);
const PG_URL = process.env.BENCH_DATABASE_URL ?? '';
const DAY = 86_400_000;
const END = Date.UTC(2026, 10, 26);
const START = END - 30 * DAY;
const STEP = Math.floor((END - START) / N);
const TYPES = ['message.accepted', 'message.delivered', 'message.opened', 'message.clicked'];

/** The same rows on both databases: tenant-a gets 9 in 10, one complaint in 1,000. */
async function generate(database: Database): Promise<void> {
  const pg = database.dialect === 'postgres';
  // PostgreSQL: one partition per day of the data (migration 017), as the scheduler keeps them.
  if (pg) for (let d = START; d <= END; d += DAY) await createDay(database.db, d);
  const typeOf = `case g % 4 ${TYPES.map((t, i) => `when ${i} then '${t}'`).join(' ')} end`;
  const text = pg
    ? `insert into events (tenant_id, id, type, created_at, transmission_id, message_id, recipient, mail_type, tags, metadata, data)
       select case when g % 10 = 0 then 'tenant-b' else 'tenant-a' end,
         substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3) || '-' || substr(r, 7, 12),
         case when g % 1000 = 7 then 'message.complained' else ${typeOf} end,
         to_char(to_timestamp(ms / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
         't' || (g / 100), 'm' || (g / 4), 'r' || ((g / 4) % 50000) || '@example.com', 'transactional', '[]', '{}', '{}'
       from (select g, ${START}::bigint + g::bigint * ${STEP} as ms, lpad(to_hex(${START}::bigint + g::bigint * ${STEP}), 12, '0') as h,
               md5(g::text) as r from generate_series(1, ${N}) g) s`
    : `with recursive s(g) as (select 1 union all select g + 1 from s where g < ${N})
       insert into events (tenant_id, id, type, created_at, transmission_id, message_id, recipient, mail_type, tags, metadata, data)
       select case when g % 10 = 0 then 'tenant-b' else 'tenant-a' end,
         substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3) || '-' || substr(r, 7, 12),
         case when g % 1000 = 7 then 'message.complained' else ${typeOf} end,
         strftime('%Y-%m-%dT%H:%M:%fZ', ms / 1000.0, 'unixepoch'),
         't' || (g / 100), 'm' || (g / 4), 'r' || ((g / 4) % 50000) || '@example.com', 'transactional', '[]', '{}', '{}'
       from (select g, ${START} + g * ${STEP} as ms, printf('%012x', ${START} + g * ${STEP}) as h,
               lower(hex(randomblob(9))) as r from s)`;
  await database.db.executeQuery(CompiledQuery.raw(text, []));
  await database.db.executeQuery(
    CompiledQuery.raw(
      `insert into event_tags (tenant_id, tag, event_id) select tenant_id, 'promo', id from events where ${pg ? "right(message_id, 1) = '7'" : "substr(message_id, -1) = '7'"}`,
      [],
    ),
  );
  await sql`analyze`.execute(database.db);
}

const iso = (ms: number) => new Date(ms).toISOString();
const FILTERS: Record<string, Partial<EventFilter>> = {
  'no filter (newest page)': {},
  'type (common)': { types: ['message.delivered'] },
  'type (rare)': { types: ['message.complained'] },
  'two types': { types: ['message.complained', 'message.clicked'] },
  recipient: { recipient: 'r1234@example.com' },
  transmission_id: { transmissionId: 't1234' },
  message_id: { messageId: 'm4321' },
  tag: { tag: 'promo' },
  'one day window (from, to)': { from: iso(START + 10 * DAY), to: iso(START + 11 * DAY) },
  'window + type': { from: iso(START + 10 * DAY), to: iso(START + 11 * DAY), types: ['message.opened'] },
};

async function explain(database: Database) {
  const pg = database.dialect === 'postgres';
  const out: string[] = [];
  for (const [name, partial] of Object.entries(FILTERS)) {
    const f: EventFilter = { limit: 50, types: [], ...partial };
    const q = listEventsQuery(database.db, 'tenant-a', f).compile();
    const plan = await database.db.executeQuery<Record<string, unknown>>(
      CompiledQuery.raw(`${pg ? 'explain (costs off)' : 'explain query plan'} ${q.sql}`, [...q.parameters]),
    );
    const lines = plan.rows.map((r) => String(pg ? r['QUERY PLAN'] : r.detail));
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await database.db.executeQuery(q);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const p = (x: number) => (times[Math.floor(times.length * x)] ?? 0).toFixed(2);
    out.push(`### ${name}  (p50 ${p(0.5)} ms, p99 ${p(0.99)} ms)\n${lines.map((l) => `    ${l}`).join('\n')}`);
  }
  return out.join('\n');
}

async function run(label: string, database: Database) {
  await migrateToLatest(database);
  const t0 = performance.now();
  await generate(database);
  console.log(`\n## ${label}: ${N} events generated in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  console.log(await explain(database));
  const idx = await database.db.executeQuery<{ name: string }>(
    CompiledQuery.raw(
      database.dialect === 'postgres'
        ? `select indexname as name from pg_indexes where tablename = 'events' and schemaname = current_schema() order by 1`
        : `select name from sqlite_master where type = 'index' and tbl_name = 'events' order by 1`,
      [],
    ),
  );
  console.log(`\nindexes on events: ${idx.rows.map((r) => r.name).join(', ')}`);
  await database.close();
}

/** EXPLAIN (ANALYZE, BUFFERS) of the statements listEvents issues, on a kept 10M database. */
async function explainKept(url: string) {
  const dirK = mkdtempSync(join(tmpdir(), 'postyard-events-'));
  const database = openDatabase({ databaseUrl: url, dataDir: dirK, poolSize: 2 });
  try {
    const meta = await database.db.executeQuery<{ tenant: string; start: string }>(
      CompiledQuery.raw('select tenant, start from bench_events_meta', []),
    );
    const tenant = meta.rows[0]?.tenant as string;
    const start = Number(meta.rows[0]?.start);
    const nodes: RootOperationNode[] = [];
    const capture: KyselyPlugin = {
      transformQuery: (args) => {
        nodes.push(args.node);
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    const db = database.db.withPlugin(capture);
    const uuidOf = (s: string) =>
      createHash('md5')
        .update(s)
        .digest('hex')
        .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
    const kept: Record<string, Partial<EventFilter>> = {
      'newest page': {},
      'type (common)': { types: ['message.delivered'] },
      'type (rare)': { types: ['message.complained'] },
      recipient: { recipient: 'r1240@example.com' },
      transmission_id: { transmissionId: uuidOf('t1000') },
      'tag (1 in 16)': { tag: 'blue' },
      'tag (none of the tenant)': { tag: 'promo' },
      'one hour window, 10 days ago': {
        from: iso(start + 10 * DAY + 3_600_000),
        to: iso(start + 10 * DAY + 7_200_000),
      },
    };
    const runs = Number(process.env.BENCH_RUNS ?? 200);
    const only = (process.env.BENCH_FILTERS ?? '').split(',').filter(Boolean);
    for (const [name, partial] of Object.entries(kept)) {
      if (only.length && !only.some((o) => name.startsWith(o))) continue;
      const f: EventFilter = { limit: 50, types: [], ...partial };
      nodes.length = 0;
      const rows = await listEvents(db, tenant, f);
      const statements = nodes.map((n) => db.getExecutor().compileQuery(n, { queryId: '' } as never));
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        await listEvents(database.db, tenant, f);
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const p = (x: number) => (times[Math.floor(times.length * x)] ?? 0).toFixed(2);
      console.log(
        `\n### ${name}: ${rows.length} rows, ${statements.length} statement(s); listEvents p50 ${p(0.5)} ms, p99 ${p(0.99)} ms`,
      );
      for (const st of statements) {
        const plan = await database.db.executeQuery<{ 'QUERY PLAN': string }>(
          CompiledQuery.raw(`explain (analyze, buffers) ${st.sql}`, [...st.parameters]),
        );
        console.log(`    -- ${JSON.stringify(st.parameters)}`);
        console.log(plan.rows.map((r) => `    ${r['QUERY PLAN']}`).join('\n'));
      }
    }
  } finally {
    await database.close();
    rmSync(dirK, { recursive: true, force: true });
  }
}

if (process.env.BENCH_EVENTS_DB) {
  await explainKept(process.env.BENCH_EVENTS_DB);
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'postyard-events-'));
try {
  await run('SQLite', openDatabase({ databaseUrl: null, dataDir: dir }));
  if (PG_URL) {
    const fresh = await freshPgDatabase(PG_URL);
    try {
      await run('PostgreSQL', openDatabase({ databaseUrl: fresh.url, dataDir: dir }));
    } finally {
      await fresh.drop();
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
