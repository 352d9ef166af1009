import type { Container } from '../../container.ts';
import type { Stoppable } from '../../engine.ts';
import { WebhookDispatcher } from './dispatcher.ts';
import { mailMetrics } from '../../metrics/mail-metrics.ts';

/** Starts this node's webhook dispatcher (worker role); stop() finishes in-flight POSTs (<= 10 s). */
export function start(c: Container): Stoppable {
  const dispatcher = new WebhookDispatcher(c.database, c.webhooks.registry, c.webhooks.sender, c.logger, {
    lockMs: c.config.webhookLeaseSeconds * 1000,
    nodeId: c.node.holder,
    metrics: mailMetrics(c.metrics),
  });
  dispatcher.start();
  return { name: 'webhooks', stop: () => dispatcher.stop() };
}
