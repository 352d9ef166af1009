/**
 * node --import tsx bench/accept-cpu.ts — CPU time per accepted transmission, from /proc, so the
 * scaling on bigger machines can be computed on a loaded 2-core one (issue 19):
 * - SQLite, one node; PostgreSQL, one node; PostgreSQL, two nodes on one server.
 * Single-recipient POST /v1/transmissions with autocannon (64 connections in all, split between
 * the nodes), BENCH_DURATION s (default 10) after a 5 s warm-up. Per run: accepted/s, CPU ms per
 * accept of the API process(es) (utime + stime of /proc/<pid>/stat) and of the PostgreSQL
 * backends serving them (the pids pg_stat_activity lists for the run's own database; the WAL
 * writer and other shared server processes are not counted), and a check that the database
 * holds every transmission a 202 was received for, and at most the requests still in flight when
 * autocannon stopped counting beyond them (nothing lost or duplicated).
 * Needs BENCH_DATABASE_URL for the PostgreSQL runs. Spawns `bin/postyard.js` of the current
 * directory, so the same script measures another checkout (`cd <tree> && node --import tsx
 * /path/to/bench/accept-cpu.ts`).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { freePort, machine, spawnNode, stop, table, waitHttp } from './lib.ts';
import { freshPgDatabase } from './lib-pg.ts';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = 64;
const PG_URL = process.env.BENCH_DATABASE_URL ?? '';
const TICK_MS = 10; // USER_HZ is 100 on Linux
/** The CLI from the TypeScript sources where the checkout has it (no dist/ build needed). */
const BIN = existsSync('bin/postyard-src.js') ? 'bin/postyard-src.js' : 'bin/postyard.js';
const single = JSON.stringify({
  recipients: [{ email: 'ann@example.com', name: 'Ann' }],
  content: { subject: 'Your receipt', text: 'Thanks for your order.', html: '<p>Thanks for your order.</p>' },
  options: { tags: ['receipt'], metadata: { order: '42' } },
});

function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS; // utime, stime
  } catch {
    return 0;
  }
}

async function load(urls: string[], key: string, seconds: number) {
  const results = await Promise.all(
    urls.map((url) =>
      autocannon({
        url: `${url}/v1/transmissions`,
        method: 'POST',
        connections: CONNECTIONS / urls.length,
        duration: seconds,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: single,
      }),
    ),
  );
  return {
    ok: results.reduce((n, r) => n + (r.statusCodeStats?.['202']?.count ?? 0), 0),
    bad: results.reduce((n, r) => n + r.non2xx + r.errors + r.timeouts, 0),
    p99: Math.max(...results.map((r) => r.latency.p99)),
  };
}

async function run(label: string, nodes: number, databaseUrl: string | null) {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-cpu-'));
  const db = databaseUrl ? await freshPgDatabase(databaseUrl) : null;
  const env: Record<string, string> = {
    POSTYARD_DATA_DIR: dir,
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_RATE_LIMIT_RPS: '0',
    POSTYARD_DEV_MODE: 'true',
    ...(db ? { DATABASE_URL: db.url } : {}),
  };
  const admin = db ? new pg.Client({ connectionString: db.url }) : null;
  try {
    const out = execFileSync(
      process.execPath,
      [BIN, 'tenants', 'create', '--name', 'bench', '--from', 'Bench <bench@example.com>', '--json'],
      { env: { ...process.env, ...env } },
    ).toString();
    const key = (JSON.parse(out) as { api_key: string }).api_key;
    const children = [];
    const urls: string[] = [];
    for (let i = 0; i < nodes; i++) {
      const port = await freePort();
      children.push(
        spawnNode([BIN, 'start', '--roles', 'api'], {
          ...env,
          POSTYARD_HTTP_PORT: String(port),
          POSTYARD_EHLO_NAME: `n${i}.bench`,
        }),
      );
      urls.push(`http://127.0.0.1:${port}`);
    }
    for (const u of urls) await waitHttp(`${u}/healthz`);
    await admin?.connect();
    const backends = async () =>
      admin
        ? (
            await admin.query<{ pid: number }>(
              'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
            )
          ).rows.map((r) => r.pid)
        : [];
    const warm = await load(urls, key, 5);
    const pids = await backends();
    const before = { api: children.map((c) => cpuMs(c.pid as number)), pg: new Map(pids.map((p) => [p, cpuMs(p)])) };
    const t0 = performance.now();
    const r = await load(urls, key, DURATION);
    const seconds = (performance.now() - t0) / 1000;
    const apiMs = children.reduce((n, c, i) => n + cpuMs(c.pid as number) - (before.api[i] ?? 0), 0);
    let pgMs = 0;
    for (const p of await backends()) pgMs += cpuMs(p) - (before.pg.get(p) ?? 0);
    for (const c of children) await stop(c);
    // Nothing lost or duplicated: every 202 is one stored transmission, and nothing more.
    let stored = Number.NaN;
    if (admin) {
      stored = Number((await admin.query('select count(*)::int as n from transmissions')).rows[0]?.n);
    } else {
      const sqlite = (await import('better-sqlite3')).default;
      const s = new sqlite(join(dir, 'postyard.sqlite'), { readonly: true });
      stored = (s.prepare('select count(*) as n from transmissions').get() as { n: number }).n;
      s.close();
    }
    const answered = warm.ok + r.ok;
    return {
      target: label,
      'accepted/s': Math.round(r.ok / seconds),
      'p99 ms': r.p99,
      'API CPU ms/accept': (apiMs / r.ok).toFixed(3),
      'PG backends CPU ms/accept': admin ? (pgMs / r.ok).toFixed(3) : '-',
      'total CPU ms/accept': ((apiMs + pgMs) / r.ok).toFixed(3),
      // autocannon stops counting at the end of each run with up to CONNECTIONS requests in
      // flight, which the server still stores: stored may exceed the 202s seen by that much.
      '202s seen / stored': `${answered} / ${stored}${stored >= answered && stored - answered <= 2 * CONNECTIONS && warm.bad + r.bad === 0 ? '' : ' MISMATCH'}`,
      errors: warm.bad + r.bad,
    };
  } finally {
    await admin?.end();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`machine: ${machine()}; ${CONNECTIONS} connections in all, ${DURATION} s per run; cwd ${process.cwd()}`);
const rows = [await run('sqlite, 1 node', 1, null)];
if (PG_URL) {
  rows.push(await run('postgres, 1 node', 1, PG_URL));
  rows.push(await run('postgres, 2 nodes', 2, PG_URL));
}
console.log(table(rows));
const one = rows[1];
const two = rows[2];
if (one && two) {
  console.log(
    `two nodes / one node (accepted/s): ${(Number(two['accepted/s']) / Number(one['accepted/s'])).toFixed(2)} (target >= 0.9 on this 2-core machine)`,
  );
}
