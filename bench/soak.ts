/**
 * npm run bench:soak — a real Postyard (child process, every role; or api+smtp and worker apart
 * with SOAK_ROLES=split on PostgreSQL) under a steady open-loop 1,000 requests/s for SOAK_SECONDS
 * (default 600): 80 % POST /v1/transmissions (one recipient each, delivered through the relay to a
 * sink in its own process), 10 % GET /v1/events, 10 % GET /v1/messages/:id. Every window it samples
 * latency, achieved rate, RSS/heap/CPU of the server, its longest event-loop delay and GC time, the
 * SQLite WAL size, MB/s written, queue depth and delivered count, and the disk's own fdatasync latency
 * (bench/fsync-probe.ts, in another process); the verdict holds it to p99 under
 * SOAK_P99_TARGET_MS (250) in every window and RSS flat (last third within 5 % of the first). At the
 * end it waits for the queue to drain and checks that every 202 reached the sink exactly once. Baseline in
 * the same run: the same load against bare Fastify routes (bench/soak-baseline.ts).
 * SQLite by default; PostgreSQL (a fresh database, dropped at the end) when DATABASE_URL or
 * BENCH_DATABASE_URL is set. The server is the compiled dist/ (built first), as `npm start` runs,
 * with the GLIBC_TUNABLES npm start sets (the soak's own GLIBC_TUNABLES, even empty, replaces it).
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import pg from 'pg';
import { freePort, machine, spawnNode, table, waitHttp } from './lib.ts';
import { compareDelivery, freshPgDatabase, startRecipientSink } from './lib-pg.ts';
import { FsyncProbe, mean, OpenLoop, procStat, scrapeServer, slope, type WindowStats } from './lib-soak.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const RATE = Number(process.env.SOAK_RPS ?? 1000);
const WINDOW = Number(process.env.SOAK_WINDOW_SECONDS ?? Math.min(30, Math.max(10, Math.round(SECONDS / 20))));
const WARMUP = Number(process.env.SOAK_WARMUP_SECONDS ?? Math.max(WINDOW, Math.round(SECONDS / 10)));
const BASELINE_SECONDS = Number(process.env.SOAK_BASELINE_SECONDS ?? Math.min(60, SECONDS));
const DRAIN_SECONDS = Number(process.env.SOAK_DRAIN_SECONDS ?? 1800);
const [SEND_OF_20, EVENTS_OF_20] = (process.env.SOAK_MIX ?? '16,2').split(',').map(Number) as [number, number];
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';
const SPLIT = process.env.SOAK_ROLES === 'split';
const CAPACITY = Math.ceil(SECONDS * RATE * (SEND_OF_20 / 20)) + 10_000;
const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;

/** The targets the verdict prints (issue 13): p99 under this in every window, RSS flat within RSS_FLAT. */
const P99_TARGET_MS = Number(process.env.SOAK_P99_TARGET_MS ?? 250);
const RSS_FLAT = 0.05;
/** Extra node options for the server, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile a stall. */
const NODE_ARGS = (process.env.SOAK_NODE_ARGS ?? '').split(' ').filter(Boolean);
/**
 * The server runs what users run: the compiled dist/ (`postyard start`, `npm start`), built from
 * the current sources first. Through tsx (`SOAK_SOURCES=1`) every module imported after start-up
 * is compiled on first use and the render threads load through the loader too, which made the
 * first windows of a soak slower than any production start.
 */
const FROM_SOURCES = process.env.SOAK_SOURCES === '1';
const BIN = FROM_SOURCES ? 'bin/postyard-src.js' : 'bin/postyard.js';

/**
 * The glibc setting `npm start` gives the server (package.json, the Dockerfile and the systemd
 * unit carry the same, docs/operations.md "Memory"), so the soak measures the memory of the
 * server as users start it. GLIBC_TUNABLES in the soak's own environment (empty: none) wins.
 */
function startTunables(): string {
  if (process.env.GLIBC_TUNABLES !== undefined) return process.env.GLIBC_TUNABLES;
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } };
  return /GLIBC_TUNABLES=\$\{GLIBC_TUNABLES:-([^}]*)\}/.exec(pkg.scripts.start)?.[1] ?? '';
}
const TUNABLES = startTunables();

const cleanups: (() => Promise<unknown> | unknown)[] = [];
async function cleanup() {
  for (const f of cleanups.splice(0).reverse()) await Promise.resolve(f()).catch(() => {});
}
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function stopChild(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

interface Row {
  t: number;
  tail: boolean;
  w: WindowStats;
  rss: number[];
  heapMb: number;
  heapTotalMb: number;
  externalMb: number;
  /** Longest event-loop delay of the (first) server in this window, and its p99. */
  loopMaxMs: number;
  loopP99Ms: number;
  /** Time the server spent in GC pauses during this window. */
  gcMs: number;
  /** SQLite WAL file size at the end of the window (NaN on PostgreSQL). */
  walMb: number;
  /** MB/s the server processes wrote to storage during the window. */
  writeMbs: number;
  cpuPct: number;
  /** The disk under it: longest 8 KB fdatasync of bench/fsync-probe.ts, and how many over 100 ms. */
  fsyncMaxMs: number;
  fsyncOver100: number;
  queue: number;
  delivered: number;
}

/** Drives the load for `seconds`, calling `sample` at the end of every window. */
async function drive(
  load: OpenLoop,
  seconds: number,
  sample: (t: number, w: WindowStats, tail: boolean) => Promise<void>,
) {
  const t0 = performance.now();
  let done = false;
  const running = load.run(seconds).then(() => {
    done = true;
  });
  for (let k = 1; ; k++) {
    const at = t0 + k * WINDOW * 1000;
    // A window that starts after the last request was sent only collects late answers: "tail".
    const tail = load.scheduleDone;
    while (!done && performance.now() < at) await sleep(Math.min(200, Math.max(1, at - performance.now())));
    await sample(Math.round((performance.now() - t0) / 1000), load.takeWindow(), tail);
    if (done) break;
  }
  await running;
}

async function baseline() {
  const port = await freePort();
  const child = spawnNode(['--import', 'tsx', 'bench/soak-baseline.ts'], { PORT: String(port) });
  cleanups.push(() => stopChild(child));
  await waitHttp(`http://127.0.0.1:${port}/healthz`);
  const load = new OpenLoop(`http://127.0.0.1:${port}`, {
    key: null,
    rate: RATE,
    sendOf20: SEND_OF_20,
    eventsOf20: EVENTS_OF_20,
    capacity: Math.ceil(BASELINE_SECONDS * RATE) + 1000,
  });
  const rows: { t: number; w: WindowStats; rss: number; tail: boolean }[] = [];
  await drive(load, BASELINE_SECONDS, async (t, w, tail) => {
    rows.push({ t, w, rss: procStat(child.pid as number).rssMb, tail });
  });
  await load.close();
  await stopChild(child);
  return rows;
}

async function main() {
  console.log(
    `machine: ${machine()}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  console.log(
    `soak: ${RATE} requests/s open loop for ${SECONDS} s (mix of 20: ${SEND_OF_20} POST /v1/transmissions, ` +
      `${EVENTS_OF_20} GET /v1/events, ${20 - SEND_OF_20 - EVENTS_OF_20} GET /v1/messages/:id), ${WINDOW} s windows, ` +
      `warm-up ${WARMUP} s, ${PG_URL ? 'PostgreSQL' : 'SQLite'}, roles ${SPLIT ? 'api,smtp + worker' : 'all in one process'}`,
  );
  if (SPLIT && !PG_URL) throw new Error('SOAK_ROLES=split needs PostgreSQL (DATABASE_URL): SQLite runs one node');
  if (!FROM_SOURCES && process.env.SOAK_NO_BUILD !== '1') {
    console.log('server: compiled dist/ (building it: npm run build:server; SOAK_SOURCES=1 runs the sources)');
    execFileSync('npm', ['run', '--silent', 'build:server'], { stdio: 'inherit' });
  } else console.log(`server: ${FROM_SOURCES ? 'TypeScript sources through tsx' : 'dist/ as it is (SOAK_NO_BUILD=1)'}`);
  console.log(`server environment: GLIBC_TUNABLES=${TUNABLES || '(none)'}, as npm start sets it`);

  console.log(`baseline: bare Fastify, same load, ${BASELINE_SECONDS} s ...`);
  const base = await baseline();

  const dir = mkdtempSync(join(tmpdir(), 'postyard-soak-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const db = PG_URL ? await freshPgDatabase(PG_URL) : null;
  if (db) cleanups.push(() => db.drop());
  const sink = await startRecipientSink(CAPACITY);
  cleanups.push(() => sink.close());
  const httpPort = await freePort();
  const env: Record<string, string> = {
    POSTYARD_DATA_DIR: dir,
    POSTYARD_HTTP_PORT: String(httpPort),
    POSTYARD_SMTP_PORT: String(await freePort()),
    POSTYARD_INBOUND_PORT: String(await freePort()),
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_DEV_MODE: 'true',
    // The sink speaks plain SMTP: the explicit opt-out from relay TLS (docs/operations.md).
    POSTYARD_RELAY_URL: `smtp://127.0.0.1:${sink.port}?tls=none`,
    POSTYARD_EHLO_NAME: 'soak.postyard.test',
    // The limiter stays on (its buckets are part of what must not leak) but far above the load.
    POSTYARD_RATE_LIMIT_RPS: String(RATE * 20),
    POSTYARD_RATE_LIMIT_BURST: String(RATE * 40),
    ...(db ? { DATABASE_URL: db.url } : {}),
    GLIBC_TUNABLES: TUNABLES,
  };
  const out = execFileSync(
    process.execPath,
    [BIN, 'tenants', 'create', '--name', 'soak', '--from', 'Shop <shop@bench.test>', '--json'],
    { env: { ...process.env, ...env } },
  ).toString();
  const key = (JSON.parse(out) as { api_key: string }).api_key;
  const children = SPLIT
    ? [
        spawnNode([...NODE_ARGS, BIN, 'start', '--roles', 'api,smtp'], env),
        spawnNode([...NODE_ARGS, BIN, 'start', '--roles', 'worker'], env),
      ]
    : [spawnNode([...NODE_ARGS, BIN, 'start'], env)];
  for (const c of children) cleanups.push(() => stopChild(c));
  const origin = `http://127.0.0.1:${httpPort}`;
  await waitHttp(`${origin}/healthz`);
  // A sending domain: every message is DKIM-signed with its RSA-2048 key (development mode signs
  // with a pending domain), as in production.
  const dom = await fetch(`${origin}/v1/sending-domains`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ domain: 'bench.test' }),
  });
  if (dom.status !== 201 && dom.status !== 200) throw new Error(`sending domain: ${dom.status} ${await dom.text()}`);

  const sqlite = db ? null : new SqliteDatabase(join(dir, 'postyard.sqlite'), { readonly: true });
  const pgc = db ? new pg.Client({ connectionString: db.url }) : null;
  await pgc?.connect();
  cleanups.push(async () => {
    sqlite?.close();
    await pgc?.end();
  });
  // Reads go straight to the database (SQLite read-only beside the server's writer, in WAL mode).
  const query = async <T>(text: string): Promise<T[]> => {
    if (sqlite) return sqlite.prepare(text).all() as T[];
    if (!pgc) throw new Error('no database');
    return (await pgc.query(text)).rows as T[];
  };
  // Counted over the partial indexes (migration 020), as the server's queue gauges count: one
  // `state IN (all three)` has no index and scanned the whole, growing messages table every
  // window, in this process and (SQLite) in a read transaction that kept the WAL from starting
  // over: a cost that grew with the run and was charged to the server's latency.
  const queueDepth = async () =>
    Number(
      (
        await query<{ n: number | string }>(
          "SELECT (SELECT count(*) FROM messages WHERE state IN ('queued', 'deferred')) + " +
            "(SELECT count(*) FROM messages WHERE state = 'sending') AS n",
        )
      )[0]?.n,
    );
  const states = () =>
    query<{ state: string; n: number | string }>('SELECT state, count(*) AS n FROM messages GROUP BY state');

  console.log(`postyard: pids ${children.map((c) => c.pid).join(', ')}, sink pid ${sink.pid}; running ...`);
  const load = new OpenLoop(origin, {
    key,
    rate: RATE,
    sendOf20: SEND_OF_20,
    eventsOf20: EVENTS_OF_20,
    capacity: CAPACITY,
  });
  // The disk's own commit latency beside the run (bench/fsync-probe.ts): in the data directory
  // for SQLite, and for PostgreSQL in SOAK_FSYNC_DIR (its data directory's disk; this machine has
  // one disk, so the temporary directory by default).
  const probe = new FsyncProbe(process.env.SOAK_FSYNC_DIR ?? dir);
  cleanups.push(() => probe.stop());
  console.log(`fsync probe: 8 KB + fdatasync every 50 ms in ${probe.dir}`);
  const rows: Row[] = [];
  let lastCpu = children.map((c) => procStat(c.pid as number).cpuSeconds);
  let lastGc = (await scrapeServer(origin)).gcSeconds;
  let lastWritten = children.map((c) => procStat(c.pid as number).writtenMb);
  const walMb = () => {
    try {
      return statSync(join(dir, 'postyard.sqlite-wal')).size / 2 ** 20;
    } catch {
      return Number.NaN;
    }
  };
  await drive(load, SECONDS, async (t, w, tail) => {
    const stats = children.map((c) => procStat(c.pid as number));
    const cpu = stats.map((s) => s.cpuSeconds);
    const cpuPct = (100 * cpu.reduce((a, b, k) => a + b - (lastCpu[k] ?? 0), 0)) / w.seconds;
    lastCpu = cpu;
    const written = stats.map((s) => s.writtenMb);
    const writeMbs = written.reduce((a, b, k) => a + b - (lastWritten[k] ?? 0), 0) / w.seconds;
    lastWritten = written;
    const server = await scrapeServer(origin);
    const disk = probe.takeWindow();
    const row: Row = {
      t,
      tail,
      w,
      rss: stats.map((s) => s.rssMb),
      heapMb: server.heapMb,
      heapTotalMb: server.heapTotalMb,
      externalMb: server.externalMb,
      loopMaxMs: server.loopMaxMs,
      loopP99Ms: server.loopP99Ms,
      gcMs: (server.gcSeconds - lastGc) * 1000,
      walMb: db ? Number.NaN : walMb(),
      writeMbs,
      cpuPct,
      fsyncMaxMs: disk.maxMs,
      fsyncOver100: disk.over100,
      queue: await queueDepth(),
      delivered: await sink.count(),
    };
    lastGc = server.gcSeconds;
    rows.push(row);
    console.log(
      `  t=${t}s ok/s=${Math.round(w.ok / w.seconds)} p50=${w.p50.toFixed(1)} p99=${w.p99.toFixed(1)} max=${Math.round(w.max)} ms ` +
        `errors=${w.errors} loop max=${Math.round(row.loopMaxMs)} ms gc=${Math.round(row.gcMs)} ms ` +
        `rss=${row.rss.map((r) => Math.round(r)).join('+')} MB${db ? '' : ` wal=${row.walMb.toFixed(1)} MB`} ` +
        `fsync max=${Math.round(row.fsyncMaxMs)} ms queue=${row.queue} delivered=${row.delivered}`,
    );
  });
  await load.close();

  // Drain: every accepted message must reach the sink.
  const drainStart = performance.now();
  let depth = await queueDepth();
  const alive = () => children.every((c) => c.exitCode === null && c.signalCode === null);
  while (depth > 0 && alive() && performance.now() - drainStart < DRAIN_SECONDS * 1000) {
    await sleep(500);
    depth = await queueDepth();
  }
  await sleep(1000); // the last SMTP transactions' outcomes are written after the sink's 250
  const drainSecs = (performance.now() - drainStart) / 1000;
  const dump = await sink.dump();
  const check = compareDelivery(load.accepted, load.posts, dump.counts);
  const finalStates = await states();
  const crashed = !alive();
  const exitCodes = await Promise.all(children.map((c) => stopChild(c)));
  const peak = children.map((c) => Math.max(...rows.map((r) => r.rss[children.indexOf(c)] ?? 0)));

  console.log(`\nPostyard, per ${WINDOW} s window (latency from each request's due time, open loop):`);
  console.log(
    table(
      rows.map((r) => ({
        't s': r.t,
        'ok/s': Math.round(r.w.ok / r.w.seconds),
        errors: r.w.errors + r.w.shed,
        'p50 ms': r.w.p50,
        'p99 ms': r.w.p99,
        'POST p99': r.w.sendP99,
        'GET p99': r.w.getP99,
        'max ms': Math.round(r.w.max),
        'RSS MB': r.rss.map((x) => Math.round(x)).join('+'),
        'heap MB': Math.round(r.heapMb),
        'heap total MB': Math.round(r.heapTotalMb),
        'external MB': Math.round(r.externalMb),
        'loop max ms': Math.round(r.loopMaxMs),
        'GC ms': Math.round(r.gcMs),
        ...(db ? {} : { 'WAL MB': Math.round(r.walMb) }),
        'write MB/s': Math.round(r.writeMbs),
        'CPU %': Math.round(r.cpuPct),
        'fsync max ms': Math.round(r.fsyncMaxMs),
        'fsync >100 ms': r.fsyncOver100,
        queue: r.queue,
        delivered: r.delivered,
        phase: r.tail ? 'tail' : r.t <= WARMUP ? 'warm-up' : '',
      })),
    ),
  );
  const steady = rows.filter((r) => !r.tail && r.t > WARMUP && r.w.seconds > WINDOW / 2);
  const bsteady = base.filter(
    (r) => !r.tail && r.t > Math.min(WARMUP, BASELINE_SECONDS / 3) && r.w.seconds > WINDOW / 2,
  );
  const third = Math.max(1, Math.ceil(steady.length / 3));
  const first = steady.slice(0, third);
  const last = steady.slice(-third);
  const rssOf = (rs: Row[]) => mean(rs.map((r) => r.rss.reduce((a, b) => a + b, 0)));
  const rssGrowth = rssOf(last) - rssOf(first);
  const growth = (of: (r: Row) => number) => mean(last.map(of)) - mean(first.map(of));
  const heapGrowth = growth((r) => r.heapMb);
  const heapTotalGrowth = growth((r) => r.heapTotalMb);
  const externalGrowth = growth((r) => r.externalMb);
  const p99Ratio = mean(last.map((r) => r.w.p99)) / mean(first.map((r) => r.w.p99));
  const p50Ratio = mean(last.map((r) => r.w.p50)) / mean(first.map((r) => r.w.p50));
  const okRate = (ws: { w: WindowStats }[]) => mean(ws.map((r) => r.w.ok / r.w.seconds));
  const p = (ws: { w: WindowStats }[], k: 'p50' | 'p99') => mean(ws.map((r) => r.w[k]));
  const minutes = steady.map((r) => r.t / 60);
  const queueSlope = slope(
    steady.map((r) => r.t),
    steady.map((r) => r.queue),
  );
  const totalErrors = rows.reduce((a, r) => a + r.w.errors + r.w.shed, 0);
  const statuses: Record<string, number> = { shed: 0 };
  for (const r of rows) {
    statuses.shed = (statuses.shed ?? 0) + r.w.shed;
    for (const [k, v] of Object.entries(r.w.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  }

  console.log('\nAgainst the baseline (same load, same run; steady windows only):');
  console.log(
    table([
      {
        target: `bare Fastify (${BASELINE_SECONDS} s)`,
        'ok/s': Math.round(okRate(bsteady)),
        'p50 ms': p(bsteady, 'p50'),
        'p99 ms': p(bsteady, 'p99'),
        'RSS MB': Math.round(mean(bsteady.map((r) => r.rss))),
        'p50 ratio': 1,
        'p99 ratio': 1,
      },
      {
        target: `postyard (${SECONDS} s)`,
        'ok/s': Math.round(okRate(steady)),
        'p50 ms': p(steady, 'p50'),
        'p99 ms': p(steady, 'p99'),
        'RSS MB': Math.round(rssOf(steady)),
        'p50 ratio': p(steady, 'p50') / p(bsteady, 'p50'),
        'p99 ratio': p(steady, 'p99') / p(bsteady, 'p99'),
      },
    ]),
  );
  console.log(`achieved rate ratio postyard / bare: ${(okRate(steady) / okRate(bsteady)).toFixed(2)}`);

  const memOk = Math.abs(rssGrowth) / rssOf(first) <= RSS_FLAT;
  // Every window that saw answers counts, warm-up and tail included: a stall is a stall.
  const judged = rows.filter((r) => r.w.ok + r.w.errors > 0);
  const slowWindows = judged.filter((r) => !(r.w.p99 < P99_TARGET_MS));
  const latOk = p99Ratio < 1.5;
  const rateOk = okRate(steady) >= 0.98 * RATE && totalErrors === 0;
  const drained = depth === 0;
  const mailOk = drained && check.lost === 0;
  console.log('\nVerdict:');
  console.log(
    `  target p99 < ${P99_TARGET_MS} ms in every window: ${
      slowWindows.length === 0
        ? `MET (${judged.length} windows, worst p99 ${Math.max(...judged.map((r) => r.w.p99)).toFixed(1)} ms)`
        : `NOT MET in ${slowWindows.length} of ${judged.length} windows (${slowWindows
            .map((r) => `t=${r.t}s p99 ${Math.round(r.w.p99)} ms, disk fsync max ${Math.round(r.fsyncMaxMs)} ms`)
            .join(', ')})`
    }; longest event-loop delay ${Math.round(Math.max(...rows.map((r) => r.loopMaxMs)))} ms`,
  );
  console.log(
    `  target RSS last third within ${RSS_FLAT * 100} % of the first: ${memOk ? 'MET' : 'NOT MET'} (${Math.round(
      rssOf(first),
    )} -> ${Math.round(rssOf(last))} MB, ${((100 * rssGrowth) / rssOf(first)).toFixed(1)} %)`,
  );
  console.log(
    `  memory: RSS ${Math.round(rssOf(first))} -> ${Math.round(rssOf(last))} MB (first vs last third of steady windows, ` +
      `${signed(rssGrowth)} MB, slope ${slope(
        minutes,
        steady.map((r) => r.rss.reduce((a, b) => a + b, 0)),
      ).toFixed(2)} MB/min), heap ${signed(heapGrowth)} MB, peak RSS ` +
      `${peak.map((x) => Math.round(x)).join('+')} MB`,
  );
  // Where an RSS change sits: V8's committed heap, the external memory it accounts for, or the
  // rest (native allocations: SQLite's page cache, the allocator's arenas, thread stacks).
  if (children.length === 1)
    console.log(
      `  memory by owner (first vs last third): V8 heap committed ${signed(heapTotalGrowth)} MB, external ` +
        `${signed(externalGrowth)} MB, the rest of RSS (native) ${signed(rssGrowth - heapTotalGrowth - externalGrowth)} MB`,
    );
  console.log(
    `  latency: p99 last/first third ${p99Ratio.toFixed(2)}, p50 ${p50Ratio.toFixed(2)}: ${latOk ? 'no rise (< 1.5x)' : 'RISES (>= 1.5x)'}`,
  );
  console.log(
    `  rate: ${Math.round(okRate(steady))} ok/s of ${RATE} target, ${totalErrors} errors/shed: ${rateOk ? 'held' : 'NOT HELD'}`,
  );
  console.log(
    `  answers: ${Object.entries(statuses)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
  console.log(
    `  delivery: queue slope ${queueSlope.toFixed(1)} msgs/s over the steady windows ` +
      `(${queueSlope > 5 ? 'delivery falls behind the accept rate' : 'delivery keeps up'}); drained in ${drainSecs.toFixed(1)} s after the load`,
  );
  console.log(
    `  mail: ${load.acceptedCount} accepted (202), ${dump.count} received by the sink, lost ${
      drained ? check.lost : `unknown (${depth} still queued after ${DRAIN_SECONDS} s)`
    }, duplicates ${check.duplicates}, received without a 202 seen ${check.unexpected}${
      check.firstLost.length ? `, first lost indices ${check.firstLost.join(',')}` : ''
    }: ${mailOk ? 'no lost mail' : 'MAIL LOST OR NOT DRAINED'}`,
  );
  console.log(`  final message states: ${finalStates.map((s) => `${s.state}=${s.n}`).join(' ')}`);
  console.log(
    `  server exit codes ${crashed ? '(A SERVER EXITED BY ITSELF DURING THE RUN)' : 'after SIGTERM'}: ${exitCodes.join(', ')}`,
  );
  if (!mailOk || crashed) process.exitCode = 1;
}

try {
  await main();
} finally {
  await cleanup();
}
