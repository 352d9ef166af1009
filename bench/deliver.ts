/**
 * npm run bench:deliver — 20,000 queued single-recipient messages, DKIM-signed (RSA-2048),
 * delivered by Postyard's worker to a local sink, against a raw nodemailer pool sending the same
 * messages signed with the same key to the same sink, in the same run; plus the sign-only ceiling.
 *
 * npm run bench:deliver -- --tracking (or BENCH_TRACKING=1) — the cost of open and click
 * tracking instead: html bodies with 20 links, delivered by the worker with tracking off and on
 * in the same run, in blocks of rounds off, on, on, off (drift in the machine's load hits both
 * alike); prints the median of the per-pair ratios on / off (target >= 0.9, docs/benchmarks.md)
 * and of the CPU per message ratios (trackingCost).
 *
 * npm run bench:deliver -- --shaping (or BENCH_SHAPING=1) — the cost of pacing (docs/pacing.md):
 * the worker with rate limits and automation rules on (a pacing file whose limits are set high,
 * connection limits as shipped) and off (POSTYARD_PACING=false), rounds off, on, on, off; prints
 * the ratio on / off (target >= 0.9). BENCH_DATABASE_URL adds the same rounds on PostgreSQL,
 * where every grant goes through the shared ledger (pacing_counts under an advisory lock).
 */
import { fork } from 'node:child_process';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import type { MessageState } from '../src/db/message-state.ts';
import { dkimDnsRecordValue, dkimSign, generateDkimKeyPair } from '../src/modules/delivery/render/dkim.ts';
import { buildMessage } from '../src/modules/delivery/render/mime.ts';
import { createLogger } from '../src/logger.ts';
import { startDnsServer } from '../test/peers/dns-server.ts';
import { freePort, freshPgSchema, machine, spawnNode, stop, table } from './lib.ts';

const TRACKING_MODE = process.argv.includes('--tracking') || process.env.BENCH_TRACKING === '1';
/** Messages per round; --tracking: 24 rounds of 2,500 and a warm-up by default (trackingCost). */
const N = Number(process.env.BENCH_MESSAGES ?? (TRACKING_MODE ? 2_500 : 20_000));
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';
const keys = generateDkimKeyPair();
const TEXT = 'Thanks for your order. Your receipt is attached below.\n'.repeat(20);
const HTML = `<html><body>${'<p>Thanks for your order. Your receipt is below.</p>'.repeat(20)}</body></html>`;
const SHAPING_MODE = process.argv.includes('--shaping') || process.env.BENCH_SHAPING === '1';
/** Limits far above what one machine sends; connection limits as shipped for `default`. */
const HIGH_LIMITS = `sites:
  default:
    max_connections: 5
    messages_per_connection: 1000
    messages_per_minute: 10000000
    messages_per_hour: 10000000
`;
/** 20 links, as a marketing newsletter has: products, footer, social. */
const HTML_LINKS = `<html><body>${Array.from(
  { length: 20 },
  (_, i) =>
    `<p>Item ${i}: <a href="https://shop.bench.test/products/${1000 + i}?utm_source=newsletter&amp;utm_campaign=week47">see the offer</a></p>`,
).join('')}</body></html>`;

async function startSink() {
  const port = await freePort();
  const child = fork('bench/sink-server.ts', {
    env: { ...process.env, PORT: String(port) },
    execArgv: ['--import', 'tsx'],
  });
  await new Promise((r) => child.once('message', r));
  const count = () =>
    new Promise<number>((resolve) => {
      child.once('message', (m: { count: number }) => resolve(m.count));
      child.send({ count: true });
    });
  return { port, count, close: () => stop(child) };
}

async function signCeiling(): Promise<number> {
  const raw = await buildMessage({
    from: 'Shop <shop@bench.test>',
    to: { email: 'x@dest.test' },
    subject: 'Receipt',
    text: TEXT,
    html: HTML,
    messageId: 'x@bench.test',
  });
  const end = performance.now() + 3000;
  let n = 0;
  while (performance.now() < end) {
    dkimSign(raw, { domainName: 'bench.test', keySelector: 's1', privateKey: keys.privateKeyPem });
    n++;
  }
  return n / 3;
}

async function rawPool(port: number): Promise<number> {
  const transport = nodemailer.createTransport({
    pool: true,
    maxConnections: 5,
    // As many messages per connection as Postyard's default for unknown sites (shaping.ts).
    maxMessages: 1000,
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    dkim: { domainName: 'bench.test', keySelector: 's1', privateKey: keys.privateKeyPem },
    // Same TCP_NODELAY socket option Postyard's client sets, so the comparison is like for like.
    getSocket: (_opts: unknown, cb: (err: Error | null, s?: { connection: import('node:net').Socket }) => void) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.setNoDelay(true);
        cb(null, { connection: socket });
      });
      socket.once('error', (err) => cb(err));
    },
  } as never);
  const t0 = performance.now();
  let next = 0;
  const sendOne = async () => {
    for (;;) {
      const i = next++;
      if (i >= N) return;
      await transport.sendMail({
        from: 'Shop <shop@bench.test>',
        to: `r${i}@dest.test`,
        subject: 'Receipt',
        text: TEXT,
        html: HTML,
        envelope: { from: `bounces+${i}@bench.test`, to: [`r${i}@dest.test`] },
      });
    }
  };
  await Promise.all(Array.from({ length: 50 }, sendOne));
  const secs = (performance.now() - t0) / 1000;
  transport.close();
  return N / secs;
}

/** utime + stime of a process, all its threads (ms; /proc/<pid>/stat, 100 ticks a second). */
async function processCpuMs(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

interface RunShape {
  html: string;
  /** Sets options.open_tracking and options.click_tracking; undefined = the defaults. */
  tracking?: boolean;
}

async function postyard(
  label: string,
  dbEnv: Record<string, string>,
  sinkPort: number,
  dnsAddress: string,
  shape: RunShape = { html: HTML },
  messages: number = N,
) {
  const env = {
    ...dbEnv,
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_DEV_MODE: 'true',
    POSTYARD_DNS_SERVERS: dnsAddress,
    POSTYARD_MX_PORT: String(sinkPort),
    POSTYARD_EHLO_NAME: 'bench.postyard.test',
  };
  const config = loadConfig({ ...process.env, ...env });
  const c = await createContainer(config, createLogger('warn'));
  const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <shop@bench.test>' });
  // A sending domain gives the worker its RSA-2048 DKIM key (dev mode signs with a pending domain).
  await c.domains.create(tenant.tenant_id, await c.domains.prepare(tenant.tenant_id, { domain: 'bench.test' }));
  // Queue the messages through the real accept path (10,000 recipients per transmission).
  const { validateTransmission } = await import('../src/modules/transmissions/transmissions.validate.ts');
  for (let start = 0; start < messages; start += 10_000) {
    const body = {
      recipients: Array.from({ length: Math.min(10_000, messages - start) }, (_, i) => ({
        email: `r${start + i}@dest.test`,
      })),
      content: { subject: 'Receipt', text: TEXT, html: shape.html },
      ...(shape.tracking === undefined
        ? {}
        : { options: { open_tracking: shape.tracking, click_tracking: shape.tracking } }),
    };
    const input = await validateTransmission(body as never, 'Shop <shop@bench.test>');
    await c.database.db.transaction().execute((trx) => c.transmissions.accept(trx, tenant.tenant_id, input));
  }
  await c.close();
  const t0 = performance.now();
  const benchCpu0 = process.cpuUsage();
  // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of the worker process.
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
  // The TypeScript sources (as the tests run them), never a dist/ built before the last edit.
  const child = spawnNode([...prof, 'bin/postyard-src.js', 'start', '--roles', 'worker'], { ...env });
  const check = await createContainer(config, createLogger('warn'));
  const count = async (states: MessageState[]) =>
    Number(
      (
        await check.database.db
          .selectFrom('messages')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('state', 'in', states)
          .executeTakeFirstOrThrow()
      ).n,
    );
  // The clock that compares with the raw pool starts at the worker's first claim: the pool's
  // figure does not include starting Node and loading modules either. Both are printed.
  let tClaim = 0;
  while (tClaim === 0) {
    await new Promise((r) => setTimeout(r, 5));
    if ((await count(['sending', 'delivered'])) > 0) tClaim = performance.now();
    if (performance.now() - t0 > 60_000) throw new Error('the worker claimed nothing within 60 s');
  }
  let delivered = 0;
  while (delivered < messages) {
    await new Promise((r) => setTimeout(r, 50));
    delivered = await count(['delivered']);
    if (performance.now() - t0 > 600_000) throw new Error(`stuck at ${delivered}`);
  }
  const end = performance.now();
  const secs = (end - tClaim) / 1000;
  const withStart = (end - t0) / 1000;
  const rss = await import('./lib.ts').then((l) => l.peakRssMb(child.pid as number));
  // CPU per message (worker process with its render threads; this process, which runs the sink
  // MX): far less swayed by other load on the machine than msgs/s.
  const workerCpuMs = (await processCpuMs(child.pid as number)) / messages;
  const bc = process.cpuUsage(benchCpu0);
  const sinkCpuMs = (bc.user + bc.system) / 1000 / messages;
  await stop(child);
  await check.close();
  return {
    label,
    rate: messages / secs,
    withStartRate: messages / withStart,
    startSecs: (tClaim - t0) / 1000,
    rss,
    workerCpuMs,
    sinkCpuMs,
  };
}

/** The median of a list (the mean of the middle two for an even count). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/**
 * --tracking: the same 20-link html delivered with tracking off and on, SQLite, in blocks of
 * rounds off, on, on, off (BENCH_ROUNDS blocks, default 6), after one uncounted warm-up round.
 * Each block gives two pairs (its first two rounds, its last two), each pair the ratio of two
 * neighbouring rounds, so drift in the machine's load between pairs cancels; the figure is the
 * median of the pairs' ratios, which one disturbed round cannot move much (a mean of four rounds
 * swung 0.69-0.92 on a quiet machine, issue 16). Printed with it: the median of the pairs' CPU per
 * message ratios (worker process with its render threads, plus this process running the sink).
 * Default: 2,500 messages per round, 24 rounds plus the warm-up, about 2-3 minutes on the 2-core
 * dev machine when quiet.
 */
async function trackingCost(sinkPort: number, dnsAddress: string) {
  type Run = { tracking: boolean; rate: number; cpu: number };
  const round = async (tracking: boolean, messages: number): Promise<Run> => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-deliver-'));
    try {
      const r = await postyard(
        `sqlite, tracking ${tracking ? 'on' : 'off'}`,
        { POSTYARD_DATA_DIR: dir },
        sinkPort,
        dnsAddress,
        { html: HTML_LINKS, tracking },
        messages,
      );
      console.log(
        `${r.label}: ${Math.round(r.rate)} msgs/s (peak RSS ${Math.round(r.rss)} MB; CPU per message: worker ${r.workerCpuMs.toFixed(2)} ms, sink ${r.sinkCpuMs.toFixed(2)} ms)`,
      );
      return { tracking, rate: r.rate, cpu: r.workerCpuMs + r.sinkCpuMs };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const blocks = Number(process.env.BENCH_ROUNDS ?? 6);
  const t0 = performance.now();
  // Warm-up: the sink process and the page cache start cold; this round is not counted.
  await round(true, Math.min(N, 1000));
  const pairs: { on: Run; off: Run }[] = [];
  for (let b = 0; b < blocks; b++) {
    const [a, c, d, e] = [await round(false, N), await round(true, N), await round(true, N), await round(false, N)];
    pairs.push({ off: a, on: c }, { off: e, on: d });
  }
  const rates = pairs.map((p) => p.on.rate / p.off.rate);
  const cpus = pairs.map((p) => p.off.cpu / p.on.cpu);
  const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
  const all = (on: boolean) => pairs.map((p) => (on ? p.on : p.off));
  console.log(
    table(
      pairs.map((p, i) => ({
        pair: i + 1,
        'off msgs/s': Math.round(p.off.rate),
        'on msgs/s': Math.round(p.on.rate),
        'ratio on / off': p.on.rate / p.off.rate,
        'CPU ms/msg off': p.off.cpu.toFixed(2),
        'CPU ms/msg on': p.on.cpu.toFixed(2),
        'CPU ratio off / on': p.off.cpu / p.on.cpu,
      })),
    ),
  );
  const q = (xs: number[]) => `min ${Math.min(...xs).toFixed(3)}, max ${Math.max(...xs).toFixed(3)}`;
  console.log(
    `msgs/s: off mean ${Math.round(mean(all(false).map((r) => r.rate)))}, on mean ${Math.round(mean(all(true).map((r) => r.rate)))}; ratio of the means ${(mean(all(true).map((r) => r.rate)) / mean(all(false).map((r) => r.rate))).toFixed(3)}`,
  );
  console.log(
    `median of ${pairs.length} per-pair ratios tracking on / off (same run): ${median(rates).toFixed(3)} (${q(rates)}); target >= 0.9`,
  );
  // Worker + sink CPU per message, off / on: what throughput would be if CPU were the only limit.
  console.log(
    `median of per-pair CPU per message ratios off / on: ${median(cpus).toFixed(3)} (${q(cpus)}); CPU ms/msg medians off ${median(all(false).map((r) => r.cpu)).toFixed(2)}, on ${median(all(true).map((r) => r.cpu)).toFixed(2)}`,
  );
  console.log(
    `${N} messages per round, ${pairs.length * 2} rounds + warm-up, ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  );
}

/** --shaping: pacing on (limits high) and off, ABBA rounds, SQLite (and PostgreSQL when given). */
async function shapingCost(sinkPort: number, dnsAddress: string) {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-shaping-'));
  const file = join(dir, 'pacing.yaml');
  writeFileSync(file, HIGH_LIMITS);
  const backends: { name: string; env: () => Promise<{ env: Record<string, string>; drop: () => Promise<void> }> }[] =
    [];
  if (!process.env.BENCH_SKIP_SQLITE) {
    backends.push({
      name: 'sqlite',
      env: async () => {
        const d = mkdtempSync(join(tmpdir(), 'postyard-bench-deliver-'));
        return { env: { POSTYARD_DATA_DIR: d }, drop: async () => rmSync(d, { recursive: true, force: true }) };
      },
    });
  }
  if (PG_URL) {
    backends.push({
      name: 'postgres',
      env: async () => {
        const s = await freshPgSchema(PG_URL);
        return { env: { POSTYARD_DATA_DIR: dir, DATABASE_URL: s.url }, drop: s.drop };
      },
    });
  }
  const results: Record<string, string | number>[] = [];
  try {
    for (const b of backends) {
      const runs: { on: boolean; rate: number }[] = [];
      // BENCH_ROUNDS=n repeats the off, on, on, off block (a loaded machine drifts).
      const order = Array.from({ length: Number(process.env.BENCH_ROUNDS ?? 1) }, () => [
        false,
        true,
        true,
        false,
      ]).flat();
      for (const on of order) {
        const db = await b.env();
        try {
          const shaping: Record<string, string> = on
            ? { POSTYARD_PACING: 'true', POSTYARD_PACING_FILE: file }
            : { POSTYARD_PACING: 'false' };
          const r = await postyard(
            `${b.name}, shaping ${on ? 'on' : 'off'}`,
            { ...db.env, ...shaping },
            sinkPort,
            dnsAddress,
          );
          runs.push({ on, rate: r.rate });
          console.log(`${r.label}: ${Math.round(r.rate)} msgs/s (peak RSS ${Math.round(r.rss)} MB)`);
        } finally {
          await db.drop();
        }
      }
      const mean = (on: boolean) => {
        const xs = runs.filter((r) => r.on === on).map((r) => r.rate);
        return xs.reduce((a, c) => a + c, 0) / xs.length;
      };
      results.push(
        { run: `${b.name}: shaping off`, 'msgs/s (mean)': Math.round(mean(false)), ratio: 1 },
        {
          run: `${b.name}: shaping on, limits high`,
          'msgs/s (mean)': Math.round(mean(true)),
          ratio: mean(true) / mean(false),
        },
      );
      console.log(
        `${b.name}: ratio shaping on / off (same run): ${(mean(true) / mean(false)).toFixed(3)}; target >= 0.9`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(table(results));
}

async function main() {
  console.log(`machine: ${machine()}; ${N} messages, RSA-2048 DKIM${TRACKING_MODE ? ', tracking on vs off' : ''}`);
  const dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx.dest.test' }] },
    'mx.dest.test': { A: ['127.0.0.1'] },
    's1._domainkey.bench.test': { TXT: [dkimDnsRecordValue(keys.publicKeyBase64).match(/.{1,255}/g) ?? []] },
  });
  if (SHAPING_MODE) {
    const sink = await startSink();
    try {
      await shapingCost(sink.port, dnsServer.address);
    } finally {
      await sink.close();
      await dnsServer.close();
    }
    return;
  }
  if (TRACKING_MODE) {
    const sink = await startSink();
    try {
      await trackingCost(sink.port, dnsServer.address);
    } finally {
      await sink.close();
      await dnsServer.close();
    }
    return;
  }
  const ceiling = await signCeiling();
  const sink = await startSink();
  const pool = await rawPool(sink.port);
  const rows: Awaited<ReturnType<typeof postyard>>[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-deliver-'));
  try {
    // BENCH_SKIP_SQLITE=1 measures PostgreSQL only.
    if (!process.env.BENCH_SKIP_SQLITE)
      rows.push(await postyard('sqlite', { POSTYARD_DATA_DIR: dir }, sink.port, dnsServer.address));
    if (PG_URL) {
      const s = await freshPgSchema(PG_URL);
      try {
        rows.push(
          await postyard('postgres', { POSTYARD_DATA_DIR: dir, DATABASE_URL: s.url }, sink.port, dnsServer.address),
        );
      } finally {
        await s.drop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await sink.close();
    await dnsServer.close();
  }
  console.log(
    table([
      {
        target: 'sign-only loop (1 core)',
        'msgs/s': Math.round(ceiling),
        'vs raw pool': '-',
        'vs signing ceiling': 1,
        'incl. process start': '-',
        'peak RSS MB': '-',
      },
      {
        target: 'raw nodemailer pool (baseline)',
        'msgs/s': Math.round(pool),
        'vs raw pool': 1,
        'vs signing ceiling': pool / ceiling,
        'incl. process start': '-',
        'peak RSS MB': '-',
      },
      ...rows.map((r) => ({
        target: `postyard worker ${r.label}`,
        'msgs/s': Math.round(r.rate),
        'vs raw pool': r.rate / pool,
        'vs signing ceiling': r.rate / ceiling,
        'incl. process start': `${Math.round(r.withStartRate)}/s (start ${r.startSecs.toFixed(2)} s)`,
        'peak RSS MB': Math.round(r.rss),
      })),
    ]),
  );
  console.log('targets: >= 1000 msgs/s, >= 0.5 of the raw pool, >= 0.6 of the signing ceiling');
}

await main();
