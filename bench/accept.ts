/**
 * npm run bench:accept — single-recipient transmissions over HTTP (64 connections) against a
 * bare Fastify route in the same run, one 10,000-recipient transmission, on SQLite and (when
 * BENCH_DATABASE_URL or DATABASE_URL is set) PostgreSQL in the same sitting. Prints a table with ratios,
 * the API process CPU per accept (from /proc) and PostgreSQL / SQLite.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { freePort, freshPgSchema, machine, spawnNode, stop, table, waitHttp } from './lib.ts';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = 64;
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';

const single = JSON.stringify({
  recipients: [{ email: 'ann@example.com', name: 'Ann' }],
  content: { subject: 'Your receipt', text: 'Thanks for your order.', html: '<p>Thanks for your order.</p>' },
  options: { tags: ['receipt'], metadata: { order: '42' } },
});

async function load(url: string, key: string | null) {
  const result = await autocannon({
    url: `${url}/v1/transmissions`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: DURATION,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: single,
  });
  const ok = result.statusCodeStats?.['202']?.count ?? 0;
  return {
    rps: ok / DURATION,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non202: result.non2xx + result.errors,
  };
}

/** utime + stime of a process, in ms (USER_HZ 100), from /proc. */
function cpuMs(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

async function runPostyard(label: string, env: Record<string, string>) {
  const port = await freePort();
  const fullEnv = {
    ...env,
    POSTYARD_HTTP_PORT: String(port),
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_RATE_LIMIT_RPS: '0',
    POSTYARD_DEV_MODE: 'true',
  };
  const out = execFileSync(
    process.execPath,
    ['bin/postyard-src.js', 'tenants', 'create', '--name', 'bench', '--from', 'Bench <bench@example.com>', '--json'],
    {
      env: { ...process.env, ...fullEnv },
    },
  ).toString();
  const key = (JSON.parse(out) as { api_key: string }).api_key;
  // Only the API role: delivery is measured by bench:deliver.
  const child = spawnNode(['bin/postyard-src.js', 'start', '--roles', 'api'], fullEnv);
  const url = `http://127.0.0.1:${port}`;
  await waitHttp(`${url}/healthz`);
  await load(url, key); // warm-up (JIT, caches); its figures are discarded
  const cpu0 = cpuMs(child.pid);
  const r = await load(url, key);
  // The API process's CPU per accepted transmission: moves far less with the machine's load than the rate.
  const cpuPerAccept = (cpuMs(child.pid) - cpu0) / (r.rps * DURATION);
  const big = JSON.stringify({
    recipients: Array.from({ length: 10_000 }, (_, i) => ({ email: `r${i}@example.com` })),
    content: { subject: 'Big', text: 'One transmission, many recipients.' },
  });
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    const res = await fetch(`${url}/v1/transmissions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: big,
    });
    if (res.status !== 202) throw new Error(`10k transmission answered ${res.status}`);
    await res.arrayBuffer();
    times.push(performance.now() - t0);
  }
  await stop(child);
  return { label, ...r, cpuPerAccept, bigMs: times.sort((a, b) => a - b)[1] ?? Number.NaN };
}

async function main() {
  console.log(`machine: ${machine()}; ${CONNECTIONS} connections, ${DURATION} s per run`);
  const port = await freePort();
  const bare = spawnNode(['--import', 'tsx', 'bench/bare-fastify.ts'], { PORT: String(port) });
  await waitHttp(`http://127.0.0.1:${port}/healthz`);
  await load(`http://127.0.0.1:${port}`, null);
  const baseline = await load(`http://127.0.0.1:${port}`, null);
  await stop(bare);

  const rows = [];
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-'));
  try {
    rows.push(await runPostyard('sqlite', { POSTYARD_DATA_DIR: dir }));
    if (PG_URL) {
      const s = await freshPgSchema(PG_URL);
      try {
        rows.push(await runPostyard('postgres', { POSTYARD_DATA_DIR: dir, DATABASE_URL: s.url }));
      } finally {
        await s.drop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    table([
      {
        target: 'bare fastify (baseline)',
        'accepted/s': Math.round(baseline.rps),
        'p50 ms': baseline.p50,
        'p99 ms': baseline.p99,
        ratio: 1,
        'API CPU ms/accept': '-',
        '10k-recipient ms': '-',
        errors: baseline.non202,
      },
      ...rows.map((r) => ({
        target: `postyard ${r.label}`,
        'accepted/s': Math.round(r.rps),
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        ratio: r.rps / baseline.rps,
        'API CPU ms/accept': r.cpuPerAccept.toFixed(3),
        '10k-recipient ms': Math.round(r.bigMs),
        errors: r.non202,
      })),
    ]),
  );
  const [lite, pg] = rows;
  if (lite && pg) {
    // Issue 19: the two backends in the same sitting, so the machine's load hits both alike.
    console.log(
      `PostgreSQL / SQLite accepted/s: ${(pg.rps / lite.rps).toFixed(2)} (target >= 0.8, PostgreSQL p99 < 100 ms: ${pg.p99} ms)`,
    );
  }
  console.log('targets: >= 8000 accepted/s, ratio >= 0.35, p99 < 30 ms, 10k-recipient < 1000 ms');
}

await main();
