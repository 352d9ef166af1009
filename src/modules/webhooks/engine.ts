import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/index.ts';
import type { Stoppable } from '../../engine.ts';
import type { NodeSelf } from '../../lib/node-identity.ts';
import { mailMetrics } from '../../metrics/mail-metrics.ts';
import { WebhookDispatcher } from './dispatcher.ts';
import type { WebhooksService } from './webhooks.service.ts';

/** What the dispatcher needs of its node. */
export interface WebhookEngineDeps {
  config: Pick<Config, 'webhookLeaseSeconds'>;
  database: Database;
  logger: Logger;
  metrics: Registry;
  node: NodeSelf;
  webhooks: Pick<WebhooksService, 'registry' | 'sender'>;
}

/** Starts this node's webhook dispatcher (worker role); stop() finishes in-flight POSTs (<= 10 s). */
export function start(c: WebhookEngineDeps): Stoppable {
  const dispatcher = new WebhookDispatcher(c.database, c.webhooks.registry, c.webhooks.sender, c.logger, {
    lockMs: c.config.webhookLeaseSeconds * 1000,
    nodeId: c.node.holder,
    metrics: mailMetrics(c.metrics),
  });
  dispatcher.start();
  return { name: 'webhooks', stop: () => dispatcher.stop() };
}
