/**
 * npm run bench:pg-size — PostgreSQL disk per message, for the sizing section of
 * docs/operations.md. In a fresh database (dropped afterwards): BENCH_MESSAGES (default 100,000)
 * single-recipient transmissions (text + HTML ~2.6 KB, one tag, one metadata key) accepted through
 * the real accept path, then delivered by one worker process to a sink. After each stage it prints
 * pg_total_relation_size (heap + indexes + TOAST) per table, divided by the message count, and the
 * WAL written (pg_current_wal_lsn difference: cluster-wide, so other activity on the server counts).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:pg-size
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { machine, stop, table } from './lib.ts';
import { freshPgDatabase, startRecipientSink, withPg } from './lib-pg.ts';
import { queueBacklog, spawnWorkers, startMxDns, waitDelivered, workerEnv } from './lib-workers.ts';

const N = Number(process.env.BENCH_MESSAGES ?? 100_000);
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';

interface Size {
  table: string;
  rows: number;
  total: number;
  heap: number;
  indexes: number;
}

async function sizes(url: string): Promise<Size[]> {
  return withPg(url, async (c) => {
    await c.query('ANALYZE');
    const { rows } = await c.query(`
      SELECT c.relname AS table, c.reltuples::bigint AS rows, pg_total_relation_size(c.oid) AS total,
             pg_relation_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind = 'r'
      ORDER BY pg_total_relation_size(c.oid) DESC`);
    return rows.map((r) => ({
      table: r.table,
      rows: Math.max(0, Number(r.rows)),
      total: Number(r.total),
      heap: Number(r.heap),
      indexes: Number(r.indexes),
    }));
  });
}

const lsn = (url: string) =>
  withPg(url, async (c) => (await c.query('SELECT pg_current_wal_lsn() AS l')).rows[0].l as string);
const walBytes = (url: string, from: string) =>
  withPg(url, async (c) =>
    Number((await c.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS d', [from])).rows[0].d),
  );

function print(stage: string, s: Size[], wal: number) {
  const kb = (b: number) => Math.round((b / 1024) * 10) / 10;
  const sum = s.reduce((a, r) => a + r.total, 0);
  console.log(`\n${stage}: ${N} messages`);
  console.log(
    table(
      s
        .filter((r) => r.total > 64 * 1024)
        .map((r) => ({
          table: r.table,
          rows: r.rows,
          'total MB': Math.round((r.total / 2 ** 20) * 10) / 10,
          'heap MB': Math.round((r.heap / 2 ** 20) * 10) / 10,
          'indexes MB': Math.round((r.indexes / 2 ** 20) * 10) / 10,
          'bytes/message': Math.round(r.total / N),
        })),
    ),
  );
  console.log(
    `  all tables: ${Math.round(sum / 2 ** 20)} MB = ${kb(sum / N)} KB per message = ${((sum / N) * 1e6) / 2 ** 30 > 0 ? (((sum / N) * 1e6) / 2 ** 30).toFixed(1) : '0'} GiB per million; ` +
      `WAL written ${Math.round(wal / 2 ** 20)} MB = ${kb(wal / N)} KB per message`,
  );
}

async function main() {
  if (!PG_URL) {
    console.error('bench:pg-size needs PostgreSQL: DATABASE_URL=postgres://... npm run bench:pg-size');
    process.exit(2);
  }
  console.log(`machine: ${machine()}`);
  const db = await freshPgDatabase(PG_URL);
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-size-'));
  const sink = await startRecipientSink(N + 1);
  const dns = await startMxDns();
  try {
    const env = workerEnv(dir, db.url, sink.port, dns.address);
    const l0 = await lsn(db.url);
    const secs = await queueBacklog(env, N, 1);
    console.log(`accepted ${N} single-recipient transmissions in ${secs.toFixed(1)} s`);
    print('accepted (queued)', await sizes(db.url), await walBytes(db.url, l0));
    const l1 = await lsn(db.url);
    const [worker] = spawnWorkers(1, env);
    try {
      const t = await waitDelivered(db.url, N);
      console.log(`delivered in ${t.totalSecs.toFixed(1)} s`);
    } finally {
      if (worker) await stop(worker);
    }
    print('delivered (no VACUUM FULL; autovacuum as configured)', await sizes(db.url), await walBytes(db.url, l1));
  } finally {
    await dns.close();
    await sink.close();
    rmSync(dir, { recursive: true, force: true });
    await db.drop();
  }
}

await main();
