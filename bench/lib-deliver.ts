/**
 * One Postyard worker delivering a queued backlog to the local sink, for bench/deliver.ts and its
 * modes: the messages are queued through the real accept path, then a worker process (the
 * TypeScript sources, as the tests run them) delivers them; the figure is msgs/s from its first
 * claim to the last delivery, with CPU per message of the worker and of the sink.
 */
import { fork } from 'node:child_process';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { generateDkimKeyPair } from '../src/modules/delivery/render/dkim.ts';
import { createLogger } from '../src/logger.ts';
import { freePort, peakRssMb, spawnNode, stop, waitForDelivery } from './lib.ts';

/** One RSA-2048 key for every sending domain of a run (and the sink's DNS record). */
export const keys = generateDkimKeyPair();
export const TEXT = 'Thanks for your order. Your receipt is attached below.\n'.repeat(20);
export const HTML = `<html><body>${'<p>Thanks for your order. Your receipt is below.</p>'.repeat(20)}</body></html>`;

export async function startSink() {
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

/** utime + stime of a process, all its threads (ms; /proc/<pid>/stat, 100 ticks a second). */
async function processCpuMs(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** CPU ms of each thread of a process (/proc/PID/task/TID/stat). */
async function threadCpuMs(pid: number): Promise<Record<string, number>> {
  const { readFile, readdir } = await import('node:fs/promises');
  const out: Record<string, number> = {};
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    // Node names no thread but the process (all are "node"): the main thread is the one whose id is the pid.
    const name = tid === String(pid) ? 'main' : `thread ${tid}`;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out[name] = (out[name] ?? 0) + (Number(f[11]) + Number(f[12])) * 10;
  }
  return out;
}

export interface RunShape {
  html: string;
  /**
   * Tenants the messages are spread over, each with its own sending domain (one shared DKIM key,
   * so 1,000 tenants do not cost 1,000 key generations); default 1. Their ids sort in creation
   * order, so the fair claim walks them as they were queued.
   */
  tenants?: number;
  /** Sets options.open_tracking and options.click_tracking; undefined = the defaults. */
  tracking?: boolean;
}

export async function postyard(
  label: string,
  dbEnv: Record<string, string>,
  sinkPort: number,
  dnsAddress: string,
  shape: RunShape = { html: HTML },
  messages: number,
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
  // Queue the messages through the real accept path (at most 10,000 recipients per transmission),
  // spread evenly over the tenants.
  const { validateTransmission } = await import('../src/modules/transmissions/transmissions.validate.ts');
  const tenants = Math.max(1, shape.tenants ?? 1);
  for (let t = 0; t < tenants; t++) {
    const domain = tenants === 1 ? 'bench.test' : `t${t}.bench.test`;
    const from = `Shop <shop@${domain}>`;
    const tenant = await c.tenants.create({ name: `bench ${t}`, from });
    // A sending domain gives the worker its RSA-2048 DKIM key (dev mode signs with a pending domain).
    await c.domains.create(tenant.tenant_id, {
      domain,
      selector: 's1',
      privateKeyPem: keys.privateKeyPem,
      publicKeyBase64: keys.publicKeyBase64,
    });
    const first = Math.floor((messages * t) / tenants);
    const last = Math.floor((messages * (t + 1)) / tenants);
    for (let start = first; start < last; start += 10_000) {
      const body = {
        recipients: Array.from({ length: Math.min(10_000, last - start) }, (_, i) => ({
          email: `r${start + i}@dest.test`,
        })),
        content: { subject: 'Receipt', text: TEXT, html: shape.html },
        ...(shape.tracking === undefined
          ? {}
          : { options: { open_tracking: shape.tracking, click_tracking: shape.tracking } }),
      };
      const input = await validateTransmission(body as never, from);
      await c.database.db.transaction().execute((trx) => c.transmissions.accept(trx, tenant.tenant_id, input));
    }
  }
  await c.close();
  const t0 = performance.now();
  const benchCpu0 = process.cpuUsage();
  // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of the worker process.
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
  // The TypeScript sources (as the tests run them), never a dist/ built before the last edit.
  const child = spawnNode([...prof, 'bin/postyard-src.js', 'start', '--roles', 'worker'], { ...env });
  const check = await createContainer(config, createLogger('warn'));
  // The clock that compares with the raw pool starts at the worker's first claim: the pool's
  // figure does not include starting Node and loading modules either. Both are printed.
  const { firstClaimAt: tClaim, endAt: end } = await waitForDelivery(check, messages, t0);
  const secs = (end - tClaim) / 1000;
  const withStart = (end - t0) / 1000;
  const rss = await peakRssMb(child.pid as number);
  // CPU per message (worker process with its render threads; this process, which runs the sink
  // MX): far less swayed by other load on the machine than msgs/s.
  const workerCpuMs = (await processCpuMs(child.pid as number)) / messages;
  // BENCH_THREADS=1: the worker's CPU by thread (main, render threads, libuv pool, checkpointer).
  if (process.env.BENCH_THREADS === '1') {
    const byThread = Object.entries(await threadCpuMs(child.pid as number)).sort((a, b) => b[1] - a[1]);
    console.log(
      `${label}: worker CPU ms by thread: ${byThread
        .filter(([, ms]) => ms >= 100)
        .map(([n, ms]) => `${n} ${ms}`)
        .join(', ')}`,
    );
  }
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
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}
