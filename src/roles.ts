import { hostname } from 'node:os';
import type { Role } from './config.ts';
import { type Container, every } from './container.ts';
import { buildApp } from './http/app.ts';
import { newId } from './lib/ids.ts';
import { acquireLease } from './jobs/lease.ts';
import { startSmtpServer } from './smtp/server.ts';
import { createDeliveryWorker } from './modules/delivery/index.ts';
import { EVENT_RETENTION_INTERVAL_MS, runEventRetention } from './modules/events/events.retention.ts';
import { startWebhookDispatcher } from './modules/webhooks/worker.ts';

/** Something a role started; stop() stops taking new work and finishes what is in flight. */
export interface Running {
  name: string;
  stop(): Promise<void>;
}

/** One identity per process, used as lease holder and in logs. */
export const NODE_ID = `${hostname()}:${process.pid}:${newId().slice(-8)}`;

async function startApi(c: Container): Promise<Running> {
  const app = await buildApp(c);
  await app.listen({ port: c.config.httpPort, host: c.config.httpHost });
  c.logger.info({ url: `http://${c.config.httpHost}:${c.config.httpPort}` }, 'HTTP API listening');
  every(c, 5_000, 'flush-api-key-last-used', () => c.apiKeys.flushLastUsed());
  return { name: 'api', stop: () => app.close() };
}

/** Periodic maintenance guarded by a lease so one node at a time runs it. */
function startScheduler(c: Container): Running {
  // The lease outlives two intervals, so its holder renews it before anyone else may take it.
  const purgeMs = c.config.idempotencyPurgeSeconds * 1000;
  every(c, purgeMs, 'idempotency-purge', async () => {
    if (await acquireLease(c.database, 'idempotency-purge', NODE_ID, 2 * purgeMs)) {
      const n = await c.idempotency.purgeExpired();
      if (n) c.logger.info({ removed: n }, 'expired idempotency keys purged');
    }
  });
  every(c, EVENT_RETENTION_INTERVAL_MS, 'event-retention', () => runEventRetention(c, NODE_ID));
  return { name: 'scheduler', stop: async () => {} };
}

export async function startRoles(c: Container, roles: readonly Role[]): Promise<Running[]> {
  const running: Running[] = [];
  if (roles.includes('worker')) {
    running.push(startScheduler(c));
    const worker = createDeliveryWorker(c, NODE_ID);
    worker.start();
    running.push({ name: 'delivery', stop: () => worker.stop() });
    running.push(startWebhookDispatcher(c, NODE_ID));
  }
  if (roles.includes('smtp')) {
    const smtp = await startSmtpServer(c);
    running.push({ name: 'smtp', stop: () => smtp.close() });
  }
  if (roles.includes('api')) running.push(await startApi(c));
  return running;
}

/** SIGTERM/SIGINT: stop taking work, finish in-flight work (10 s at most), release, exit 0. */
export function installShutdown(c: Container, running: Running[]) {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    c.logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      c.logger.error('shutdown took longer than 10 s; exiting');
      process.exit(1);
    }, 10_000);
    force.unref();
    await Promise.allSettled(running.map((r) => r.stop()));
    await c.close();
    clearTimeout(force);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}
