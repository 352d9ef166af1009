import type { Role } from './config.ts';
import { type Container, every } from './container.ts';
import { buildApp } from './http/app.ts';
import { acquireLease } from './jobs/lease.ts';
import { NodeMembership } from './jobs/node-registry.ts';
import { startSmtpServer } from './smtp/server.ts';
import { createDeliveryWorker } from './modules/delivery/index.ts';
import { EVENT_RETENTION_INTERVAL_MS, runEventRetention } from './modules/events/events.retention.ts';
import { startWebhookDispatcher } from './modules/webhooks/worker.ts';

/** Something a role started; stop() stops taking new work and finishes what is in flight. */
export interface Running {
  name: string;
  stop(): Promise<void>;
}

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
    if (await acquireLease(c.database, 'idempotency-purge', c.node.holder, 2 * purgeMs)) {
      const n = await c.idempotency.purgeExpired();
      if (n) c.logger.info({ removed: n }, 'expired idempotency keys purged');
    }
  });
  every(c, EVENT_RETENTION_INTERVAL_MS, 'event-retention', () => runEventRetention(c, c.node.holder));
  return { name: 'scheduler', stop: async () => {} };
}

/**
 * Joins the node table first: what this node's previous run left claimed (it was killed, or
 * crashed) is released before this run serves or claims anything, and from then on the heartbeat
 * lets other nodes take over this run's claims if it dies (src/jobs/node-registry.ts).
 */
async function joinNodes(c: Container): Promise<NodeMembership> {
  const membership = new NodeMembership({
    database: c.database,
    self: c.node,
    logger: c.logger,
    heartbeatMs: c.config.nodeHeartbeatSeconds * 1000,
    timeoutMs: c.config.nodeTimeoutSeconds * 1000,
  });
  await membership.join();
  c.logger.info({ nodeId: c.node.nodeId, holder: c.node.holder }, 'node joined');
  return membership;
}

/** Starts `roles`; the last entry is the node membership, to be stopped after every role. */
export async function startRoles(c: Container, roles: readonly Role[]): Promise<Running[]> {
  const membership = await joinNodes(c);
  const running: Running[] = [];
  if (roles.includes('worker')) {
    running.push(startScheduler(c));
    const worker = createDeliveryWorker(c, c.node.holder);
    worker.start();
    running.push({ name: 'delivery', stop: () => worker.stop() });
    running.push(startWebhookDispatcher(c, c.node.holder));
  }
  if (roles.includes('smtp')) {
    const smtp = await startSmtpServer(c);
    running.push({ name: 'smtp', stop: () => smtp.close() });
  }
  if (roles.includes('api')) running.push(await startApi(c));
  running.push({ name: 'node', stop: () => membership.leave() });
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
    // Roles first (they finish and release their own work), then the node leaves.
    const node = running.at(-1);
    await Promise.allSettled(running.slice(0, -1).map((r) => r.stop()));
    await node?.stop().catch((err) => c.logger.error({ err }, 'leaving the node table failed'));
    await c.close();
    clearTimeout(force);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}
