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
 *
 * npm run bench:deliver -- --claim-batch (or BENCH_CLAIM_BATCH_MODE=1) — the delivery rate with
 * claims of 200 messages against claims of BENCH_CLAIM_BATCH (default 50), the messages spread
 * over BENCH_TENANTS tenants (default 1,000), rounds 200, 50, 50, 200; prints the ratio (issue 18:
 * small claims meet the fair claim's p99 < 5 ms, bench/fair-claim.ts).
 *
 * npm run bench:deliver -- --tenants (or BENCH_TENANTS_MODE=1) — the same 20,000 messages from one
 * tenant and from BENCH_TENANTS tenants (default 1,000), rounds 1, many, many, 1; prints the ratio.
 */
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { dkimDnsRecordValue, dkimSign } from '../src/modules/delivery/render/dkim.ts';
import { buildMessage } from '../src/modules/delivery/render/mime.ts';
import { startDnsServer } from '../test/peers/dns-server.ts';
import { freshPgSchema, machine, table } from './lib.ts';
import { HTML, keys, postyard, type RunShape, startSink, TEXT } from './lib-deliver.ts';
import { trackingCost } from './lib-deliver-tracking.ts';

const TRACKING_MODE = process.argv.includes('--tracking') || process.env.BENCH_TRACKING === '1';
/** Messages per round; --tracking: 24 rounds of 2,500 and a warm-up by default (trackingCost). */
const N = Number(process.env.BENCH_MESSAGES ?? (TRACKING_MODE ? 2_500 : 20_000));
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';
const SHAPING_MODE = process.argv.includes('--shaping') || process.env.BENCH_SHAPING === '1';
const CLAIM_BATCH_MODE = process.argv.includes('--claim-batch') || process.env.BENCH_CLAIM_BATCH_MODE === '1';
const TENANTS_MODE = process.argv.includes('--tenants') || process.env.BENCH_TENANTS_MODE === '1';
/** Limits far above what one machine sends; connection limits as shipped for `default`. */
const HIGH_LIMITS = `sites:
  default:
    max_connections: 5
    messages_per_connection: 1000
    messages_per_minute: 10000000
    messages_per_hour: 10000000
`;

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

/**
 * An A/B comparison of one setting, rounds A, B, B, A (BENCH_ROUNDS blocks), SQLite and, when
 * BENCH_DATABASE_URL is set, PostgreSQL; prints the ratio of the means B / A.
 */
interface Variant {
  label: string;
  env: Record<string, string>;
  shape: RunShape;
}

interface AbMode {
  /** What differs: "shaping", "claim batch". */
  what: string;
  a: Variant;
  b: Variant;
  target: string;
}

/** --shaping: pacing on (limits high) and off. */
function shapingMode(file: string): AbMode {
  return {
    what: 'shaping',
    a: { label: 'off', env: { POSTYARD_PACING: 'false' }, shape: { html: HTML } },
    b: {
      label: 'on, limits high',
      env: { POSTYARD_PACING: 'true', POSTYARD_PACING_FILE: file },
      shape: { html: HTML },
    },
    target: '>= 0.9',
  };
}

/**
 * --claim-batch: the messages spread over BENCH_TENANTS tenants (default 1,000, 20 messages
 * each), claims of 200 (the default before issue 18's p99) against claims of BENCH_CLAIM_BATCH
 * (default 50). With 1,000 tenants every claim takes a few messages from each of 32 tenants:
 * what this measures is whether smaller claims cost delivery rate there.
 */
function claimBatchMode(): AbMode {
  const small = process.env.BENCH_CLAIM_BATCH ?? '50';
  const shape = { html: HTML, tenants: Number(process.env.BENCH_TENANTS ?? 1000) };
  return {
    what: 'claim batch',
    a: { label: '200', env: { POSTYARD_DELIVERY_CLAIM_BATCH: '200' }, shape },
    b: { label: small, env: { POSTYARD_DELIVERY_CLAIM_BATCH: small }, shape },
    target: '>= 0.9 (no meaningful loss)',
  };
}

/**
 * --tenants: the same messages from one tenant, then spread over BENCH_TENANTS (default 1,000),
 * each with its own transmission and sending domain. Fair claims serve the tenants in turn, so
 * every cache keyed by transmission or tenant must hold a whole turn: when the render threads'
 * shared bodies held 64, the 1,000 tenants ran at 0.6 of one tenant's rate (docs/benchmarks.md
 * "Session 14").
 */
function tenantsMode(): AbMode {
  const many = Number(process.env.BENCH_TENANTS ?? 1000);
  return {
    what: 'tenants',
    a: { label: '1', env: {}, shape: { html: HTML, tenants: 1 } },
    b: { label: String(many), env: {}, shape: { html: HTML, tenants: many } },
    target: '>= 0.8 (each tenant adds its own index entries and lookups)',
  };
}

async function abCost(mode: AbMode, sinkPort: number, dnsAddress: string) {
  const backends: { name: string; env: () => Promise<{ env: Record<string, string>; drop: () => Promise<void> }> }[] =
    [];
  const dataDir = () => mkdtempSync(join(tmpdir(), 'postyard-bench-deliver-'));
  if (!process.env.BENCH_SKIP_SQLITE) {
    backends.push({
      name: 'sqlite',
      env: async () => {
        const d = dataDir();
        return { env: { POSTYARD_DATA_DIR: d }, drop: async () => rmSync(d, { recursive: true, force: true }) };
      },
    });
  }
  if (PG_URL) {
    backends.push({
      name: 'postgres',
      env: async () => {
        const [s, d] = [await freshPgSchema(PG_URL), dataDir()];
        const drop = async () => {
          await s.drop();
          rmSync(d, { recursive: true, force: true });
        };
        return { env: { POSTYARD_DATA_DIR: d, DATABASE_URL: s.url }, drop };
      },
    });
  }
  const results: Record<string, string | number>[] = [];
  for (const backend of backends) {
    const runs: { b: boolean; rate: number }[] = [];
    // BENCH_ROUNDS=n repeats the A, B, B, A block (a loaded machine drifts).
    const order = Array.from({ length: Number(process.env.BENCH_ROUNDS ?? 1) }, () => [
      false,
      true,
      true,
      false,
    ]).flat();
    for (const b of order) {
      const db = await backend.env();
      const variant = b ? mode.b : mode.a;
      try {
        const r = await postyard(
          `${backend.name}, ${mode.what} ${variant.label}`,
          { ...db.env, ...variant.env },
          sinkPort,
          dnsAddress,
          variant.shape,
          N,
        );
        runs.push({ b, rate: r.rate });
        console.log(
          `${r.label}: ${Math.round(r.rate)} msgs/s (peak RSS ${Math.round(r.rss)} MB; CPU per message: worker ${r.workerCpuMs.toFixed(2)} ms)`,
        );
      } finally {
        await db.drop();
      }
    }
    const mean = (b: boolean) => {
      const xs = runs.filter((r) => r.b === b).map((r) => r.rate);
      return xs.reduce((x, y) => x + y, 0) / xs.length;
    };
    results.push(
      { run: `${backend.name}: ${mode.what} ${mode.a.label}`, 'msgs/s (mean)': Math.round(mean(false)), ratio: 1 },
      {
        run: `${backend.name}: ${mode.what} ${mode.b.label}`,
        'msgs/s (mean)': Math.round(mean(true)),
        ratio: mean(true) / mean(false),
      },
    );
    console.log(
      `${backend.name}: ratio ${mode.what} ${mode.b.label} / ${mode.a.label} (same run): ${(mean(true) / mean(false)).toFixed(3)}; target ${mode.target}`,
    );
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
  if (SHAPING_MODE || CLAIM_BATCH_MODE || TENANTS_MODE) {
    const sink = await startSink();
    const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-shaping-'));
    const file = join(dir, 'pacing.yaml');
    writeFileSync(file, HIGH_LIMITS);
    try {
      const mode = SHAPING_MODE ? shapingMode(file) : CLAIM_BATCH_MODE ? claimBatchMode() : tenantsMode();
      await abCost(mode, sink.port, dnsServer.address);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await sink.close();
      await dnsServer.close();
    }
    return;
  }
  if (TRACKING_MODE) {
    const sink = await startSink();
    try {
      await trackingCost(sink.port, dnsServer.address, N);
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
      rows.push(await postyard('sqlite', { POSTYARD_DATA_DIR: dir }, sink.port, dnsServer.address, { html: HTML }, N));
    if (PG_URL) {
      const s = await freshPgSchema(PG_URL);
      try {
        rows.push(
          await postyard(
            'postgres',
            { POSTYARD_DATA_DIR: dir, DATABASE_URL: s.url },
            sink.port,
            dnsServer.address,
            { html: HTML },
            N,
          ),
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
