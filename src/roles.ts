import type { Role } from './config.ts';
import type { Container } from './container.ts';
import { every } from './jobs/every.ts';
import type { StartEngine, Stoppable } from './engine.ts';
import { type App, buildApp, warmRouteSchemas } from './app.ts';
import { NodeMembership } from './jobs/node-registry.ts';
import { releaseClaimsOf } from './release-claims.ts';
import { start as startDelivery } from './modules/delivery/engine.ts';
import { start as startEventRetention } from './modules/events/engine.ts';
import { start as startIdempotencyPurge } from './idempotency/engine.ts';
import { start as startWebhooks } from './modules/webhooks/engine.ts';
import { startInboundServer } from './smtp/inbound-listener.ts';
import { startSmtpServer } from './smtp/server.ts';
import { startMetricsServer } from './metrics/metrics-server.ts';
import { start as startTableMaintenance } from './jobs/table-maintenance.ts';

/**
 * The worker role's engines, in start order: each module's `engine.ts` `start(c)`. A module with
 * background work adds its engine here and nowhere else.
 */
const WORKER_ENGINES: readonly StartEngine<Container>[] = [
  startIdempotencyPurge,
  startEventRetention,
  startTableMaintenance,
  startDelivery,
  startWebhooks,
];

/** Builds the app and compiles the hot routes' schemas, without listening yet. */
async function buildApi(c: Container): Promise<{ app: App; schemas: number }> {
  const app = await buildApp(c);
  await app.ready();
  return { app, schemas: warmRouteSchemas(app) };
}

/** Listens last of all the node's ports: /readyz answering means SMTP listens too. */
async function startApi(c: Container, { app, schemas }: { app: App; schemas: number }): Promise<Stoppable> {
  await app.listen({ port: c.config.httpPort, host: c.config.httpHost });
  c.logger.info(
    { url: `http://${c.config.httpHost}:${c.config.httpPort}`, warmSchemas: schemas },
    'HTTP API listening',
  );
  every(c, 5_000, 'flush-api-key-last-used', () => c.apiKeys.flushLastUsed());
  return { name: 'api', stop: () => app.close() };
}

/**
 * A node without the api role still answers Prometheus, on its own port (docs/operations.md
 * "Metrics"). A port already taken (a second node on the host left at the default) is logged as
 * an error and the node runs on without /metrics: mail must not stop for want of a scrape target,
 * and the scrape job's `up == 0` alert says what is missing.
 */
async function startMetrics(c: Container): Promise<Stoppable> {
  const { metricsHost: host, metricsPort: port } = c.config;
  try {
    const server = await startMetricsServer(c.metrics, port, host);
    c.logger.info({ url: `http://${host}:${server.port}/metrics` }, 'metrics listening');
    return { name: 'metrics', stop: () => server.close() };
  } catch (err) {
    c.logger.error(
      { err, host, port },
      'metrics listener could not start (POSTYARD_METRICS_PORT); /metrics not served',
    );
    return { name: 'metrics', stop: async () => {} };
  }
}

/**
 * Joins the node table first: what this node's previous run left claimed (it was killed, or
 * crashed) is released before this run serves or claims anything, and from then on the heartbeat
 * lets other nodes take over this run's claims if it dies (src/jobs/node-registry.ts).
 */
async function joinNodes(c: Container): Promise<NodeMembership> {
  const membership = new NodeMembership({
    database: c.database,
    releaseClaims: releaseClaimsOf,
    self: c.node,
    logger: c.logger,
    heartbeatMs: c.config.nodeHeartbeatSeconds * 1000,
    timeoutMs: c.config.nodeTimeoutSeconds * 1000,
  });
  await membership.join();
  c.logger.info({ nodeId: c.node.nodeId, holder: c.node.holder }, 'node joined');
  return membership;
}

/**
 * Before the node takes SMTP or HTTP requests: the database pool's connections are opened and the
 * engines' threads started, so a node that becomes ready under load answers at full speed from
 * its first request (docs/operations.md "Start-up"). A warm-up failure is logged, not fatal: the
 * same work then happens on first use, as it did before warm-ups existed.
 */
async function warmUp(c: Container, engines: readonly Stoppable[]): Promise<void> {
  const started = Date.now();
  const results = await Promise.allSettled([c.database.warm(), ...engines.map((e) => e.warm?.())]);
  for (const r of results) if (r.status === 'rejected') c.logger.warn({ err: r.reason }, 'warm-up step failed');
  c.logger.info({ ms: Date.now() - started }, 'warmed up');
}

/** Starts `roles`; the last entry is the node membership, to be stopped after every role. */
export async function startRoles(c: Container, roles: readonly Role[]): Promise<Stoppable[]> {
  const membership = await joinNodes(c);
  const running: Stoppable[] = [];
  if (roles.includes('worker')) {
    for (const start of WORKER_ENGINES) running.push(start(c));
  }
  // The threads load on their own cores and the connections open on the server's while this
  // thread builds the HTTP app; nothing listens until all of it is done.
  const warming = warmUp(c, running);
  const built = roles.includes('api') ? buildApi(c) : null;
  // A build that fails is reported by its await below, not as an unhandled rejection.
  built?.catch(() => {});
  await warming;
  if (roles.includes('smtp')) {
    const smtp = await startSmtpServer(c);
    running.push({ name: 'smtp', stop: () => smtp.close() });
  }
  if (roles.includes('inbound')) {
    const inbound = await startInboundServer(c);
    running.push({ name: 'inbound', stop: () => inbound.close() });
  }
  running.push(built ? await startApi(c, await built) : await startMetrics(c));
  running.push({ name: 'node', stop: () => membership.leave() });
  return running;
}

/** SIGTERM/SIGINT: stop taking work, finish in-flight work (10 s at most), release, exit 0. */
export function installShutdown(c: Container, running: Stoppable[]) {
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
