import type { Container } from '../../container.ts';
import { MxResolver } from './mx-resolver.ts';
import { createRenderer } from './render-pool.ts';
import type { SigningKeyLookup } from './renderer.ts';
import { relayFromUrl } from './smtp-client.ts';
import { DeliveryWorker, type DeliveryWorkerOptions } from './worker.ts';

/** Builds this node's delivery worker from config (relay or MX, DNS servers, MX port, EHLO name). */
export function createDeliveryWorker(
  c: Container,
  workerId: string,
  overrides: Partial<DeliveryWorkerOptions> = {},
): DeliveryWorker {
  const signingKey: SigningKeyLookup = (t, d) => c.domains.signingKeyFor(t, d);
  return new DeliveryWorker({
    workerId,
    database: c.database,
    suppressions: c.suppressions,
    logger: c.logger,
    ehloName: c.config.ehloName,
    leaseMs: c.config.deliveryLeaseSeconds * 1000,
    routing: {
      resolver: new MxResolver({ ...(c.config.dnsServers ? { servers: c.config.dnsServers } : {}) }),
      relay: c.config.relayUrl ? relayFromUrl(c.config.relayUrl) : null,
      mxPort: c.config.mxPort,
      allowPrivate: c.config.devMode || c.config.allowPrivateMxTargets,
    },
    signingKey,
    renderer: createRenderer(c.config.renderThreads, c.logger),
    ...overrides,
  });
}
