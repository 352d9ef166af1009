/**
 * npm run bench:smtp — 20,000 messages over 10 concurrent authenticated SMTP connections
 * (nodemailer pool, STARTTLS + AUTH PLAIN, one RCPT each) to a bare smtp-server that accepts
 * and discards (bench/bare-smtp.ts) and to Postyard's submission server (`postyard start
 * --roles smtp` on SQLite; also PostgreSQL when BENCH_DATABASE_URL is set), in the same run.
 * Every server is a child process; the runs alternate in rounds. Prints messages/s, the
 * server's CPU time per message, p50/p99 latency per message and the ratio to the bare server.
 * Targets: >= 1,500 messages/s accepted and >= 0.4 of the bare server.
 * BENCH_MESSAGES overrides the count; BENCH_CPU_PROF=<dir> writes V8 CPU profiles of the servers.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { createLogger } from '../src/logger.ts';
import { freePort, freshPgSchema, machine, machineCpu, spawnNode, stop, table } from './lib.ts';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 20_000);
const WARMUP = Math.min(2_000, MESSAGES);
const CONNECTIONS = 10;
const ROUNDS = 4;
const PG_URL = process.env.BENCH_DATABASE_URL ?? '';

// A typical transactional message, built once: the client's MIME work is not what is measured.
const RAW = Buffer.from(
  [
    'From: Shop <shop@example.com>',
    'To: Ann <ann@example.com>',
    'Subject: Your receipt',
    'Message-ID: <bench@example.com>',
    'Date: Sun, 22 Nov 2026 10:00:00 +0000',
    'MIME-Version: 1.0',
    'X-Postyard-Options: {"tags":["receipt"],"metadata":{"order":"42"}}',
    'Content-Type: multipart/alternative; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Thanks for your order. '.repeat(20),
    '--b1',
    'Content-Type: text/html; charset=utf-8',
    '',
    `<p>${'Thanks for your order. '.repeat(20)}</p>`,
    '--b1--',
    '',
  ].join('\r\n'),
);

async function waitPort(port: number, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listening on ${port}`);
}

/** A nodemailer pool of CONNECTIONS authenticated connections, kept for the whole run. */
function client(port: number, user: string, pass: string) {
  return nodemailer.createTransport({
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Number.POSITIVE_INFINITY,
    host: '127.0.0.1',
    port,
    secure: false,
    requireTLS: true,
    tls: { rejectUnauthorized: false },
    auth: { user, pass, method: 'PLAIN' },
    // Nagle on the client's socket holds the final "." of each message until the server's
    // delayed ACK (~40 ms): that would measure the TCP stack, not the servers.
    getSocket: (_opts: unknown, cb: (err: Error | null, socketOptions?: { connection: net.Socket }) => void) => {
      const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
      socket.once('connect', () => cb(null, { connection: socket }));
      socket.once('error', (err) => cb(err));
    },
  } as nodemailer.TransportOptions);
}

/** Sends `count` messages, ten in flight. */
async function load(transport: ReturnType<typeof client>, count: number) {
  const latencies: number[] = [];
  let failed = 0;
  let firstError = '';
  const t0 = performance.now();
  // Ten senders, one message in flight each: every pooled connection stays busy and the
  // latency of a message is its own, not time spent queued behind thousands of others.
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < count) {
        next++;
        const s = performance.now();
        try {
          await transport.sendMail({ envelope: { from: 'shop@example.com', to: ['ann@example.com'] }, raw: RAW });
          latencies.push(performance.now() - s);
        } catch (err) {
          failed++;
          firstError ||= (err as Error).message;
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  if (failed) console.error(`${failed} messages failed; first error: ${firstError}`);
  return { seconds, latencies, failed };
}

/** CPU time (user + system, ms) a child process has used so far, from /proc. */
function cpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU of every PostgreSQL server process (backends, WAL writer, checkpointer), in ms: what the
 * database costs per message beside the Node process, on the same cores.
 */
function postgresCpuMs(): number {
  let ms = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres')) continue;
      ms += cpuMs(Number(pid));
    } catch {
      // the process ended between the listing and the read
    }
  }
  return ms;
}

interface Target {
  label: string;
  port: number;
  user: string;
  pass: string;
  child: ChildProcess;
  transport?: ReturnType<typeof client>;
  seconds: number;
  cpuMs: number;
  /** PostgreSQL server processes' CPU during this target's rounds (any target: 0 when not used). */
  pgCpuMs: number;
  idleJiffies: number;
  totalJiffies: number;
  latencies: number[];
  failed: number;
}

function profileFlags(name: string): string[] {
  return process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', `${process.env.BENCH_CPU_PROF}/${name}`] : [];
}

async function startBare(): Promise<Target> {
  const port = await freePort();
  const child = spawnNode([...profileFlags('bare'), '--import', 'tsx', 'bench/bare-smtp.ts'], { PORT: String(port) });
  return {
    label: 'bare smtp-server (baseline)',
    port,
    user: 'bench',
    pass: 'bench',
    child,
    seconds: 0,
    cpuMs: 0,
    pgCpuMs: 0,
    idleJiffies: 0,
    totalJiffies: 0,
    latencies: [],
    failed: 0,
  };
}

async function startPostyard(label: string, env: Record<string, string>): Promise<Target> {
  const port = await freePort();
  const fullEnv: Record<string, string> = {
    ...env,
    POSTYARD_SMTP_PORT: String(port),
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_DEV_MODE: 'true',
    // The per-credential budget would cap the run; connection limits stay at their defaults.
    POSTYARD_SMTP_MESSAGES_PER_MINUTE: '0',
  };
  // Tenant and SMTP credential made through the services, before the server starts.
  const c = await createContainer(loadConfig(fullEnv), createLogger('warn'));
  const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <shop@example.com>' });
  const cred = await c.smtpCredentials.create(tenant.tenant_id, { name: 'bench' });
  await c.close();
  const child = spawnNode([...profileFlags(label), 'bin/postyard-src.js', 'start', '--roles', 'smtp'], fullEnv);
  return {
    label: `postyard ${label}`,
    port,
    user: cred.username,
    pass: cred.password,
    child,
    seconds: 0,
    cpuMs: 0,
    pgCpuMs: 0,
    idleJiffies: 0,
    totalJiffies: 0,
    latencies: [],
    failed: 0,
  };
}

async function main() {
  console.log(
    `machine: ${machine()}; ${MESSAGES} messages of ${RAW.length} bytes per server, ${CONNECTIONS} connections (STARTTLS + AUTH PLAIN), ${ROUNDS} interleaved rounds`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-smtp-'));
  const pg = PG_URL ? await freshPgSchema(PG_URL) : null;
  const targets: Target[] = [];
  try {
    targets.push(await startBare());
    targets.push(await startPostyard('sqlite', { POSTYARD_DATA_DIR: join(dir, 'sqlite') }));
    // The same durability as PostgreSQL's default commit (a flush of the log at every commit):
    // the fair baseline for a PostgreSQL figure that waits for its flushes (issue 19).
    if (pg)
      targets.push(
        await startPostyard('sqlite-full', {
          POSTYARD_DATA_DIR: join(dir, 'sqlite-full'),
          POSTYARD_SQLITE_SYNCHRONOUS: 'full',
        }),
      );
    if (pg) targets.push(await startPostyard('postgres', { POSTYARD_DATA_DIR: join(dir, 'pg'), DATABASE_URL: pg.url }));
    for (const t of targets) {
      await waitPort(t.port);
      t.transport = client(t.port, t.user, t.pass);
      // Connects and authenticates the pool (AUTH is a deliberately slow scrypt check: once per
      // connection, not part of the per-message figures), warms JIT and caches; discarded.
      await load(t.transport, WARMUP);
    }
    // Rounds alternate between the servers, so a busier or quieter moment of the machine hits
    // all of them alike and the ratio stays meaningful.
    for (let round = 0; round < ROUNDS; round++) {
      for (const t of targets) {
        const cpu0 = cpuMs(t.child.pid);
        const pg0 = postgresCpuMs();
        const j0 = machineCpu();
        const r = await load(t.transport as ReturnType<typeof client>, MESSAGES / ROUNDS);
        t.cpuMs += cpuMs(t.child.pid) - cpu0;
        t.pgCpuMs += postgresCpuMs() - pg0;
        const j1 = machineCpu();
        t.idleJiffies += j1.total - j1.busy - (j0.total - j0.busy);
        t.totalJiffies += j1.total - j0.total;
        t.seconds += r.seconds;
        t.latencies.push(...r.latencies);
        t.failed += r.failed;
      }
    }
  } finally {
    for (const t of targets) t.transport?.close();
    await Promise.all(targets.map((t) => stop(t.child)));
    await pg?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
  const base = targets[0] as Target;
  const rate = (t: Target) => (MESSAGES - t.failed) / t.seconds;
  const pct = (t: Target, p: number) => {
    const l = [...t.latencies].sort((a, b) => a - b);
    return l[Math.min(l.length - 1, Math.floor(l.length * p))] ?? Number.NaN;
  };
  console.log(
    table(
      targets.map((t) => ({
        target: t.label,
        'messages/s': Math.round(rate(t)),
        'server CPU us/msg': Math.round((t.cpuMs * 1000) / MESSAGES),
        'PostgreSQL CPU us/msg': Math.round((t.pgCpuMs * 1000) / MESSAGES),
        'machine idle %': Math.round((100 * t.idleJiffies) / Math.max(1, t.totalJiffies)),
        'p50 ms': pct(t, 0.5),
        'p99 ms': pct(t, 0.99),
        ratio: rate(t) / rate(base),
        failed: t.failed,
      })),
    ),
  );
  console.log('targets: >= 1500 messages/s accepted, ratio >= 0.4');
  const lite = targets.find((t) => t.label === 'postyard sqlite');
  const liteFull = targets.find((t) => t.label === 'postyard sqlite-full');
  const onPg = targets.find((t) => t.label === 'postyard postgres');
  if (lite && onPg) {
    // Issue 19: measured in the same alternating rounds, so the machine's load hits both alike.
    console.log(
      `PostgreSQL / SQLite messages/s: ${(rate(onPg) / rate(lite)).toFixed(2)} (target >= 0.8); server CPU per message: ${(onPg.cpuMs / lite.cpuMs || 0).toFixed(2)}x`,
    );
  }
  if (liteFull && onPg) {
    console.log(
      `PostgreSQL / SQLite with synchronous=FULL (both flush the log at every commit): ${(rate(onPg) / rate(liteFull)).toFixed(2)}`,
    );
  }
  console.log(
    `load average after the run: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
}

await main();
