import type { ChildProcess } from 'node:child_process';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { createLogger } from '../src/logger.ts';
import { validateTransmission } from '../src/modules/transmissions/transmissions.validate.ts';
import { startDnsServer } from '../test/peers/dns-server.ts';
import { spawnNode } from './lib.ts';
import { withPg } from './lib-pg.ts';

/** Helpers for bench/workers-scaling.ts and bench/pg-size.ts: a queued backlog on PostgreSQL. */

const WORDS = (
  'order receipt thanks your item shipped total invoice account payment card delivery address ' +
  'today week support refund return price quantity product number customer service team please ' +
  'contact reply question update status tracking package arrive estimated date store online'
).split(' ');

/**
 * A text body and an HTML body of ~1.1 KB each, different for every seed: words drawn by a small
 * PRNG, so TOAST compression in PostgreSQL sees about as much redundancy as in real mail, not a
 * repeated line that compresses to nothing.
 */
export function bodies(seed: number): { text: string; html: string } {
  let x = (seed * 2654435761 + 1) >>> 0;
  const words: string[] = [];
  for (let i = 0; i < 180; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    words.push(WORDS[x % WORDS.length] as string);
  }
  const lines = [];
  for (let i = 0; i < words.length; i += 12) lines.push(words.slice(i, i + 12).join(' '));
  return { text: lines.join('\n'), html: `<html><body>${lines.map((l) => `<p>${l}</p>`).join('')}</body></html>` };
}

/** The environment of a worker node delivering via MX lookup (DNS on loopback) to the sink. */
export function workerEnv(dataDir: string, databaseUrl: string, sinkPort: number, dns: string): Record<string, string> {
  return {
    POSTYARD_DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_DEV_MODE: 'true',
    POSTYARD_DNS_SERVERS: dns,
    POSTYARD_MX_PORT: String(sinkPort),
    POSTYARD_EHLO_NAME: 'bench.postyard.test',
  };
}

/** dest.test's MX is 127.0.0.1 (the sink listens on POSTYARD_MX_PORT). */
export function startMxDns() {
  return startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx.dest.test' }] },
    'mx.dest.test': { A: ['127.0.0.1'] },
  });
}

/**
 * Creates a tenant and its sending domain (its RSA-2048 key signs every message) and queues `n`
 * messages `r<i>@dest.test` through the real accept path: `perTransmission` recipients per
 * transmission (1 = the usual transactional shape), 500 accepts per database transaction.
 */
export async function queueBacklog(env: Record<string, string>, n: number, perTransmission: number): Promise<number> {
  const c = await createContainer(loadConfig({ ...process.env, ...env }), createLogger('warn'));
  const t0 = performance.now();
  try {
    const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <shop@bench.test>' });
    await c.domains.create(tenant.tenant_id, await c.domains.prepare(tenant.tenant_id, { domain: 'bench.test' }));
    const inputs = [];
    for (let start = 0; start < n; start += perTransmission) {
      const body = {
        recipients: Array.from({ length: Math.min(perTransmission, n - start) }, (_, i) => ({
          email: `r${start + i}@dest.test`,
        })),
        content: { subject: `Receipt ${start}`, ...bodies(start) },
        options: { tags: ['receipt'], metadata: { order: String(start) } },
      };
      inputs.push(await validateTransmission(body as never, 'Shop <shop@bench.test>'));
      if (inputs.length === 500 || start + perTransmission >= n) {
        const batch = inputs.splice(0);
        await c.database.db.transaction().execute(async (trx) => {
          for (const input of batch) await c.transmissions.accept(trx, tenant.tenant_id, input);
        });
      }
    }
  } finally {
    await c.close();
  }
  return (performance.now() - t0) / 1000;
}

export function spawnWorkers(k: number, env: Record<string, string>): ChildProcess[] {
  return Array.from({ length: k }, () => spawnNode(['bin/postyard-src.js', 'start', '--roles', 'worker'], env));
}

/** Polls the delivered count every 200 ms; times from now to the first and to the last delivery. */
export async function waitDelivered(url: string, n: number, onFirst: () => void = () => {}, timeoutMs = 900_000) {
  const t0 = performance.now();
  let first = Number.NaN;
  let delivered = 0;
  await withPg(url, async (c) => {
    while (delivered < n) {
      await new Promise((r) => setTimeout(r, 200));
      const { rows } = await c.query("SELECT count(*) AS n FROM messages WHERE state = 'delivered'");
      delivered = Number(rows[0].n);
      if (delivered > 0 && Number.isNaN(first)) {
        first = performance.now();
        onFirst();
      }
      if (performance.now() - t0 > timeoutMs) throw new Error(`stuck at ${delivered} of ${n} delivered`);
    }
  });
  const end = performance.now();
  return { totalSecs: (end - t0) / 1000, firstToLastSecs: (end - first) / 1000 };
}
