/**
 * What a claim and its outcome write if the lease lived in a table of its own instead of the
 * message row (docs/benchmarks.md "Fair claims", the next step after migration 020). A PROTOTYPE
 * in SQL, not the product: the product's claim is FairClaimer (src/modules/delivery/fair-claim.ts).
 *
 * Same queue as bench/fair-claim.ts (BENCH_QUEUED messages over BENCH_TENANTS tenants, tenant i
 * holding ~1/(i+1), every 10th row transactional), then blocks of claims of BENCH_BATCH, in the
 * order today, prototype, today, prototype (BENCH_CLAIMS per design in all):
 * - today: FairClaimer.claim (state 'sending' and the lease written into 200 message rows, their
 *   entries deleted from the two waiting indexes and inserted in messages_leased), and as the
 *   outcome the row update of src/modules/outcomes/outcomes.ts (its columns and ownership check;
 *   PostgreSQL its statement text, SQLite one IN list in place of its VALUES join).
 * - prototype: the same tenant walk and per-tenant ranges, each range skipping the ids held in
 *   `bench_message_leases (message_id primary key, holder, lease_until)`, the picks inserted there
 *   (the message rows are not written); the outcome updates the rows (state, attempt, response)
 *   where this holder's lease exists, and deletes the leases.
 * Outcomes are written for the claim made 10 claims before (2,000 messages in flight), all
 * delivered, one batch per claim. Both print WAL per claim and per outcome batch (SQLite: pages,
 * from the WAL index header's mxFrame; PostgreSQL: kB of the server's WAL insert position, so
 * other writers add to it: read the medians) and the main thread's CPU per claim.
 * Not in the prototype (a product change would need them): the takeover of leases that ran out,
 * release of a dead node's leases, a re-check on PostgreSQL that a picked row is still waiting
 * after its lease is inserted (read committed: the INSERT's snapshot may predate an outcome), the
 * `sending` state read from the leases table by the API and the gauges.
 * BENCH_LEASE_INDEXES (default `lease_until,holder`) lists the leases table's secondary indexes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { dialectSql, isPostgres, runSql } from '../src/db/dialect.ts';
import type { Executor } from '../src/db/executor.ts';
import { WAITING_SQL } from '../src/db/message-state.ts';
import type { MessagesTable } from '../src/db/schema.ts';
import { isoAt } from '../src/lib/clock.ts';
import { createLogger } from '../src/logger.ts';
import { FairClaimer, TENANTS_PER_CLAIM } from '../src/modules/delivery/fair-claim.ts';
import { NEXT_TENANTS } from '../src/modules/outcomes/queue.sql.ts';
import { freshPgSchema, machine, table } from './lib.ts';
import { mainThreadNs, pct, walFrames } from './lib-claim-cost.ts';
import { queueSkewed } from './lib-queue.ts';

const QUEUED = Number(process.env.BENCH_QUEUED ?? 1_000_000);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 1_000);
const CLAIMS = Number(process.env.BENCH_CLAIMS ?? 150);
const BATCH = Number(process.env.BENCH_BATCH ?? 200);
const PG_URL = process.env.BENCH_DATABASE_URL ?? '';
const LAG = 10;
const LEASE_MS = 300_000;
const LEASE_INDEXES = (process.env.BENCH_LEASE_INDEXES ?? 'lease_until,holder').split(',').filter(Boolean);
const HOLDER = 'bench-node-0123456789ab:12345:0123456789abcdef';

const NOT_LEASED = 'and not exists (select 1 from bench_message_leases l where l.message_id = messages.id)';

/** [until, holder, now, tenants, share, limit] -> the leased ids (SQLite: under the writer lock). */
const LEASE = dialectSql({
  sqlite:
    'insert into bench_message_leases (message_id, holder, lease_until) select m.id, ?, ? ' +
    'from json_each(?) t cross join messages m on m.id in (' +
    `select id from (select id from messages indexed by messages_waiting_fair where tenant_id = t.value and ${WAITING_SQL} ` +
    `and priority = 0 and next_attempt_at <= ? ${NOT_LEASED} order by next_attempt_at limit ?) union all ` +
    `select id from (select id from messages indexed by messages_waiting_fair where tenant_id = t.value and ${WAITING_SQL} ` +
    `and priority = 1 and next_attempt_at <= ? ${NOT_LEASED} order by next_attempt_at limit ?) limit ?) limit ? ` +
    'returning message_id',
  sqliteArgs: [1, 0, 3, 2, 4, 2, 4, 4, 5],
  postgres:
    'with picked as (select x.id from unnest($4::text[]) as t(tid) cross join lateral (' +
    `(select id from messages where tenant_id = t.tid and ${WAITING_SQL} and priority = 0 and next_attempt_at <= $3 ${NOT_LEASED} order by next_attempt_at limit $5) ` +
    'union all ' +
    `(select id from messages where tenant_id = t.tid and ${WAITING_SQL} and priority = 1 and next_attempt_at <= $3 ${NOT_LEASED} order by next_attempt_at limit $5) ` +
    'limit $5) x limit $6) ' +
    'insert into bench_message_leases (message_id, holder, lease_until) select id, $2, $1 from picked ' +
    'on conflict do nothing returning message_id',
});

const ROWS = dialectSql({
  sqlite: 'select * from messages where id in (select value from json_each(?))',
  postgres: 'select * from messages where id = any($1::text[])',
});

/** outcomes.ts's row update (PG_UPDATE; sqliteUpdate's columns), every outcome delivered. */
const OUTCOME_TODAY = dialectSql({
  sqlite:
    "update messages set state = 'delivered', attempt_count = attempt_count + 1, " +
    'locked_until = null, locked_by = null, last_response = ?, updated_at = ? ' +
    'where id in (select value from json_each(?)) and locked_by = ?',
  postgres:
    'update messages set state = v.state, attempt_count = v.attempt_count, next_attempt_at = v.next_attempt_at, ' +
    'locked_until = null, locked_by = null, last_response = v.last_response, updated_at = $1 ' +
    'from unnest($3::text[], $4::text[], $5::integer[], $6::text[], $7::text[]) ' +
    'as v(id, state, attempt_count, next_attempt_at, last_response) ' +
    'where messages.id = v.id and messages.locked_by = $2 returning messages.id',
});

/** [response, now, ids, holder] */
const OUTCOME_PROTO = dialectSql({
  sqlite:
    "update messages set state = 'delivered', attempt_count = attempt_count + 1, last_response = ?, updated_at = ? " +
    'where id in (select value from json_each(?)) ' +
    'and exists (select 1 from bench_message_leases l where l.message_id = messages.id and l.holder = ?)',
  postgres:
    "update messages set state = 'delivered', attempt_count = attempt_count + 1, last_response = $1, updated_at = $2 " +
    'where id = any($3::text[]) ' +
    'and exists (select 1 from bench_message_leases l where l.message_id = messages.id and l.holder = $4)',
});

/** [ids, holder] */
const UNLEASE = dialectSql({
  sqlite: 'delete from bench_message_leases where message_id in (select value from json_each(?)) and holder = ?',
  postgres: 'delete from bench_message_leases where message_id = any($1::text[]) and holder = $2',
});

const RESPONSE = '250 2.0.0 Ok: queued as 4XyZ1234567';

class PrototypeClaimer {
  private cursor = '';
  async claim(db: Executor, limit: number, nowMs: number): Promise<MessagesTable[]> {
    const walk = Math.max(1, Math.min(TENANTS_PER_CLAIM, limit));
    // A walk past the last tenant starts again from the first (as FairClaimer's does).
    for (let tries = 0; tries < 2; tries++) {
      const rows = await runSql<{ tenant_id: string }>(db, NEXT_TENANTS, [this.cursor, walk]);
      this.cursor = rows.length < walk ? '' : (rows.at(-1)?.tenant_id ?? '');
      const tenants = rows.map((r) => r.tenant_id);
      if (tenants.length === 0) continue;
      const share = Math.max(1, Math.floor(limit / tenants.length));
      const args = [isoAt(nowMs + LEASE_MS), HOLDER, isoAt(nowMs), tenants, share, limit];
      const ids = (await runSql<{ message_id: string }>(db, LEASE, args)).map((r) => r.message_id);
      return ids.length ? runSql<MessagesTable>(db, ROWS, [ids]) : [];
    }
    return [];
  }
}

async function outcomeToday(db: Executor, msgs: MessagesTable[], now: string): Promise<void> {
  const ids = msgs.map((m) => m.id).sort();
  if (isPostgres(db)) {
    const n = msgs.length;
    await runSql(db, OUTCOME_TODAY, [
      now,
      HOLDER,
      ids,
      Array(n).fill('delivered'),
      Array(n).fill(1),
      Array(n).fill(now),
      Array(n).fill(RESPONSE),
    ]);
  } else await runSql(db, OUTCOME_TODAY, [RESPONSE, now, ids, HOLDER]);
}

async function outcomeProto(db: Executor, msgs: MessagesTable[], now: string): Promise<void> {
  const ids = msgs.map((m) => m.id).sort();
  await runSql(db, OUTCOME_PROTO, [RESPONSE, now, ids, HOLDER]);
  await runSql(db, UNLEASE, [ids, HOLDER]);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-leases-'));
  const pg = PG_URL ? await freshPgSchema(PG_URL) : null;
  const env = { POSTYARD_DATA_DIR: dir, POSTYARD_LOG_LEVEL: 'warn', ...(pg ? { DATABASE_URL: pg.url } : {}) };
  console.log(
    `machine: ${machine()}; load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; ${pg ? 'PostgreSQL' : 'SQLite'}; ${QUEUED} queued across ${TENANTS} tenants, ` +
      `${CLAIMS} claims of ${BATCH} per design, outcomes ${LAG} claims behind; leases indexed by id and ${LEASE_INDEXES.join(', ') || 'nothing else'}`,
  );
  const c = await createContainer(loadConfig({ ...process.env, ...env }), createLogger('warn'));
  try {
    const db = c.database.db;
    await queueSkewed(c, QUEUED, TENANTS);
    await sql`create table bench_message_leases (message_id text primary key, holder text not null, lease_until text not null)`.execute(
      db,
    );
    // BENCH_LEASE_INDEXES: secondary indexes of the leases table (the takeover's lease end, the
    // release's holder); '' for none (both would then read the whole table of in-flight leases).
    for (const col of LEASE_INDEXES) {
      await sql`create index ${sql.raw(`bench_message_leases_${col}`)} on bench_message_leases (${sql.ref(col)})`.execute(
        db,
      );
    }
    if (pg) await sql`analyze`.execute(db);

    const shm = join(dir, 'postyard.sqlite-shm');
    const walLsn = async () =>
      Number(
        (await sql<{ b: string }>`select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::text as b`.execute(db))
          .rows[0]?.b,
      );
    const wal = async () => (pg ? walLsn() : walFrames(shm));
    const designs = ['today', 'prototype'] as const;
    type D = (typeof designs)[number];
    const stats = Object.fromEntries(
      designs.map((d) => [
        d,
        { claimWal: [] as number[], outWal: [] as number[], cpu: [] as number[], wall: [] as number[] },
      ]),
    ) as Record<D, { claimWal: number[]; outWal: number[]; cpu: number[]; wall: number[] }>;
    const fair = new FairClaimer();
    const proto = new PrototypeClaimer();
    const block = Math.max(1, Math.floor(CLAIMS / 2));
    for (let round = 0; round < 2; round++) {
      for (const d of designs) {
        const pending: MessagesTable[][] = [];
        const outcome = async (msgs: MessagesTable[], count: boolean) => {
          const now = new Date().toISOString();
          const w0 = await wal();
          await db
            .transaction()
            .execute((trx) => (d === 'today' ? outcomeToday(trx, msgs, now) : outcomeProto(trx, msgs, now)));
          const w1 = await wal();
          if (count && w1 >= w0) stats[d].outWal.push(w1 - w0);
        };
        for (let i = 0; i < block; i++) {
          await new Promise((r) => setImmediate(r));
          const w0 = await wal();
          const m0 = mainThreadNs();
          const s = performance.now();
          const got =
            d === 'today'
              ? await fair.claim(c.database, HOLDER, BATCH, LEASE_MS)
              : await proto.claim(db, BATCH, Date.now());
          stats[d].wall.push(performance.now() - s);
          stats[d].cpu.push((mainThreadNs() - m0) / 1e6);
          const w1 = await wal();
          if (w1 >= w0) stats[d].claimWal.push(w1 - w0);
          // Only a queue too small for BENCH_CLAIMS runs dry (every walked tenant fully leased).
          if (got.length === 0) throw new Error(`${d}: a claim took nothing (queue too small?)`);
          pending.push(got);
          if (pending.length > LAG) await outcome(pending.shift() as MessagesTable[], true);
        }
        // The block's messages still in flight finish uncounted, so the next block starts clean.
        for (const p of pending) await outcome(p, false);
      }
    }
    const unit = pg ? 'WAL kB' : 'WAL pages';
    const scale = (x: number) => (pg ? x / 1024 : x);
    console.log(
      table(
        designs.map((d) => ({
          design: d === 'today' ? 'today (lease in the row)' : 'prototype (leases table)',
          [`claim ${unit} p50`]: scale(pct(stats[d].claimWal, 50)),
          [`outcome ${unit} p50`]: scale(pct(stats[d].outWal, 50)),
          [`claim + outcome ${unit}`]: scale(pct(stats[d].claimWal, 50) + pct(stats[d].outWal, 50)),
          'claim p50 ms': pct(stats[d].wall, 50),
          'claim p99 ms': pct(stats[d].wall, 99),
          'claim main-thread CPU p50 ms': pct(stats[d].cpu, 50),
          'claim main-thread CPU p99 ms': pct(stats[d].cpu, 99),
        })),
      ),
    );
  } finally {
    await c.close();
    await pg?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
