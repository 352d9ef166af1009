import type { Container } from '../../container.ts';
import { type DispatcherOptions, WebhookDispatcher } from './dispatcher.ts';

/** Starts this node's webhook dispatcher (worker role); stop() finishes in-flight POSTs (<= 10 s). */
export function startWebhookDispatcher(
  c: Container,
  nodeId: string,
  opts: Omit<DispatcherOptions, 'nodeId'> = {},
): { name: string; dispatcher: WebhookDispatcher; stop(): Promise<void> } {
  const dispatcher = new WebhookDispatcher(c.database, c.webhooks.registry, c.webhooks.sender, c.logger, {
    lockMs: c.config.webhookLeaseSeconds * 1000,
    ...opts,
    nodeId,
  });
  dispatcher.start();
  return { name: 'webhooks', dispatcher, stop: () => dispatcher.stop() };
}
