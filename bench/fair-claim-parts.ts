/**
 * npm run bench:fair-claim-parts — where a SQLite fair claim's CPU goes, statement by statement
 * (docs/benchmarks.md "Session 13"). Same queue as bench/fair-claim.ts (bench/lib-queue.ts:
 * BENCH_QUEUED messages over BENCH_TENANTS tenants), then on its own better-sqlite3 connection
 * (the product's pragmas, no driver, no Kysely), for BENCH_CLAIMS walks of 32 tenants in turn,
 * each part below run once inside a transaction that is rolled back, so every part sees the same
 * queue and none pays for a commit or a checkpoint (bench/fair-claim.ts measures whole claims):
 * - walk: the tenant walk (outcomes/queue.sql.ts NEXT_TENANTS);
 * - picks by id / by rowid: the claim's per-tenant index ranges alone;
 * - take, before: the claim statement of 1af6593's parent (picks by id, `returning *`);
 * - take, returning id: the same picks and update, returning the id alone (what returning the
 *   rows costs is the difference);
 * - take by rowid, returning *; with better-sqlite3's raw() arrays made into objects;
 * - take, product: outcomes/queue.sql.ts TAKE_FAIR (rowid picks, rows packed by json_array) and unpacking.
 * The takes run in turn first (the first of a walk reads the pages from the OS). Prints p50/p99
 * per part and each take against the before take at p50.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { WAITING_SQL } from '../src/db/message-state.ts';
import { createLogger } from '../src/logger.ts';
import { TENANTS_PER_CLAIM } from '../src/modules/delivery/fair-claim.ts';
import { MESSAGE_COLUMNS, unpackMessages } from '../src/modules/outcomes/packed-rows.ts';
import { NEXT_TENANTS, TAKE_FAIR } from '../src/modules/outcomes/queue.sql.ts';
import { pct } from './lib-claim-cost.ts';
import { machine, table } from './lib.ts';
import { queueSkewed } from './lib-queue.ts';

const QUEUED = Number(process.env.BENCH_QUEUED ?? 1_000_000);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 1_000);
const CLAIMS = Number(process.env.BENCH_CLAIMS ?? 200);
const BATCH = Number(process.env.BENCH_BATCH ?? 200);

/** The picks of the claim before 1af6593: ids, each read from the table, then found again by id. */
const PICKS_BY_ID =
  'select m.id from json_each(?) t cross join messages m on m.id in (' +
  `select id from (select id from messages indexed by messages_waiting_fair where tenant_id = t.value and ${WAITING_SQL} ` +
  'and priority = 0 and next_attempt_at <= ? order by next_attempt_at limit ?) union all ' +
  `select id from (select id from messages indexed by messages_waiting_fair where tenant_id = t.value and ${WAITING_SQL} ` +
  'and priority = 1 and next_attempt_at <= ? order by next_attempt_at limit ?) limit ?) limit ?';
/** The product's picks: rowids, from the index alone. */
const PICKS_BY_ROWID = PICKS_BY_ID.replaceAll('select id from (select id', 'select r from (select rowid as r')
  .replace('m.id in (', 'm.rowid in (')
  .replace('select m.id from', 'select m.rowid from');
// Derived by text: if the before text ever changes shape, say so rather than time the wrong statement.
if (PICKS_BY_ROWID.includes('select id') || !PICKS_BY_ROWID.includes('m.rowid in (')) {
  throw new Error(`fair-claim-parts: the rowid picks were not derived: ${PICKS_BY_ROWID}`);
}
const SET =
  "update messages set state = 'sending', locked_until = ?, locked_by = ?, next_attempt_at = ?, updated_at = ? ";
const RECHECK = `and +${WAITING_SQL} and +next_attempt_at <= ?`;
const take = (picks: string, key: string, returning: string) =>
  `${SET}where ${key} in (${picks}) ${RECHECK} returning ${returning}`;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-parts-'));
  console.log(
    `machine: ${machine()}; load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; SQLite; ${QUEUED} queued across ${TENANTS} tenants, ${CLAIMS} walks, batches of ${BATCH}`,
  );
  try {
    const c = await createContainer(
      loadConfig({ ...process.env, POSTYARD_DATA_DIR: dir, POSTYARD_LOG_LEVEL: 'warn' }),
      createLogger('warn'),
    );
    const { now } = await queueSkewed(c, QUEUED, TENANTS);
    await c.close();
    const raw = new SqliteDatabase(join(dir, 'postyard.sqlite'));
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.pragma(`cache_size = -${64 * 1024}`);
    const until = new Date(Date.now() + 300_000).toISOString();
    const walk = raw.prepare(NEXT_TENANTS.sqlite);
    const picksById = raw.prepare(PICKS_BY_ID);
    const picksByRowid = raw.prepare(PICKS_BY_ROWID);
    const before = raw.prepare(take(PICKS_BY_ID, 'id', '*'));
    const returningId = raw.prepare(take(PICKS_BY_ID, 'id', 'id'));
    const rowidAll = raw.prepare(take(PICKS_BY_ROWID, 'rowid', '*'));
    const rowidRaw = raw.prepare(take(PICKS_BY_ROWID, 'rowid', MESSAGE_COLUMNS.join(', '))).raw(true);
    const product = raw.prepare(TAKE_FAIR.sqlite);
    const toObjects = (rows: unknown[][]) =>
      rows.map((v) => {
        const o: Record<string, unknown> = {};
        for (let i = 0; i < MESSAGE_COLUMNS.length; i++) o[MESSAGE_COLUMNS[i] as string] = v[i];
        return o;
      });
    const times = new Map<string, number[]>();
    const timed = (part: string, run: () => unknown) => {
      raw.exec('begin');
      const s = process.hrtime.bigint();
      const out = run();
      const ms = Number(process.hrtime.bigint() - s) / 1e6;
      raw.exec('rollback');
      times.set(part, [...(times.get(part) ?? []), ms]);
      return out;
    };
    let cursor = '';
    for (let i = 0; i < CLAIMS; i++) {
      const tenants = (
        timed('walk (32 tenants)', () => walk.all(cursor, TENANTS_PER_CLAIM)) as { tenant_id: string }[]
      ).map((r) => r.tenant_id);
      cursor = tenants.length < TENANTS_PER_CLAIM ? '' : (tenants.at(-1) as string);
      const share = Math.max(1, Math.floor(BATCH / tenants.length));
      const list = JSON.stringify(tenants);
      const picks = [list, now, share, now, share, share, BATCH];
      const args = [until, 'bench', until, now, ...picks, now];
      timed('picks by id', () => picksById.all(...picks));
      timed('picks by rowid', () => picksByRowid.all(...picks));
      // TAKE_FAIR's own parameter order (sqliteArgs), as runSql binds it.
      const bound = (TAKE_FAIR.sqliteArgs ?? []).map((k) => [until, 'bench', now, list, share, BATCH][k]);
      const takes: [string, () => unknown][] = [
        ['take, before (ids, returning *)', () => before.all(...args)],
        ['take, ids, returning id only', () => returningId.all(...args)],
        ['take, rowids, returning *', () => rowidAll.all(...args)],
        ['take, rowids, raw() arrays to objects', () => toObjects(rowidRaw.all(...args) as unknown[][])],
        [
          'take, product (rowids, packed rows, unpacked)',
          () => unpackMessages(product.all(...bound) as { packed: string }[]),
        ],
      ];
      // In turn first: the first take of a walk reads pages from the OS that the others find cached.
      for (let k = 0; k < takes.length; k++) {
        const [part, run] = takes[(i + k) % takes.length] as [string, () => unknown];
        timed(part, run);
      }
    }
    raw.close();
    const base = pct(times.get('take, before (ids, returning *)') ?? [], 50);
    console.log(
      table(
        [...times].map(([part, ms]) => ({
          part,
          'p50 ms': pct(ms, 50),
          'p99 ms': pct(ms, 99),
          'p50 / before take': part.startsWith('take') ? (pct(ms, 50) / base).toFixed(2) : '-',
        })),
      ),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
