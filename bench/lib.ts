import { randomUUID } from 'node:crypto';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, totalmem } from 'node:os';
import pg from 'pg';
import type { Container } from '../src/container.ts';
import type { MessageState } from '../src/db/message-state.ts';
import type { MessagesTable } from '../src/db/schema.ts';
import { generateDkimKeyPair } from '../src/modules/delivery/render/dkim.ts';

/** Shared helpers for the benchmark scripts: ports, child servers, tables. */
export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function waitHttp(url: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${url}`);
}

export function spawnNode(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

/** Peak resident set (VmHWM) of a child process, in MB, from /proc. */
export async function peakRssMb(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

export async function freshPgSchema(url: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const schema = `bench_${Date.now().toString(36)}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.end();
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: u.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    },
  };
}

export function machine(): string {
  return `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

export function table(rows: Record<string, string | number>[]): string {
  if (rows.length === 0) return '';
  const cols = Object.keys(rows[0] as object);
  const cell = (v: unknown) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => `| ${vals.map((v, i) => v.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [
    line(cols),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(cols.map((c) => cell(r[c])))),
  ].join('\n');
}

/** Busy and total jiffies of all CPUs of the machine (/proc/stat), to report how saturated it was. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

/** Messages in any of `states` (the benches' progress probe while a worker delivers). */
export async function countMessages(c: Container, states: MessageState[]): Promise<number> {
  const row = await c.database.db
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('state', 'in', states)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Waits for a worker that was started at `t0` to claim (first message `sending` or delivered) and
 * then to finish `n` messages (in any of `doneStates`). Returns when each happened: the
 * delivery benches time from the first claim, as a raw client's figure does not include starting
 * Node either.
 */
export async function waitForDelivery(
  c: Container,
  n: number,
  t0: number,
  doneStates: MessageState[] = ['delivered'],
): Promise<{ firstClaimAt: number; endAt: number }> {
  let firstClaimAt = 0;
  while (firstClaimAt === 0) {
    await new Promise((r) => setTimeout(r, 5));
    if ((await countMessages(c, ['sending', 'delivered'])) > 0) firstClaimAt = performance.now();
    if (performance.now() - t0 > 60_000) throw new Error('the worker claimed nothing within 60 s');
  }
  let done = 0;
  while (done < n) {
    await new Promise((r) => setTimeout(r, 50));
    done = await countMessages(c, doneStates);
    if (performance.now() - t0 > 600_000) throw new Error(`stuck at ${done}`);
  }
  return { firstClaimAt, endAt: performance.now() };
}

/** A claimed message row as a render request carries it (the render benches): recipient r<i>@dest.test. */
export function benchMessageRow(txId: string, i: number, substitutionData: string | null = null): MessagesTable {
  return {
    tenant_id: 'bench',
    id: randomUUID(),
    transmission_id: txId,
    recipient: `r${i}@dest.test`,
    recipient_name: null,
    recipient_domain: 'dest.test',
    substitution_data: substitutionData,
    metadata: null,
    state: 'sending',
    attempt_count: 0,
    next_attempt_at: '',
    locked_until: null,
    locked_by: null,
    last_response: null,
    created_at: '',
    updated_at: '',
  };
}

/** A fresh RSA-2048 DKIM key for bench.test (selector s1), as a render request carries it (the render benches). */
export function benchSigningKey() {
  const keys = generateDkimKeyPair();
  return {
    domainName: 'bench.test',
    keySelector: 's1',
    privateKeyPem: keys.privateKeyPem,
    returnPathDomain: 'bench.test',
  };
}
