import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import type { Container } from '../../container.ts';
import type { Stoppable } from '../../engine.ts';
import { MtaStsResolver } from './smtp/mta-sts.ts';
import { MxResolver } from './mx-resolver.ts';
import { createRenderer } from './render/render-pool.ts';
import type { SigningKeyLookup } from './render/renderer.ts';
import { relayFromUrl } from './smtp/relay-url.ts';
import { DeliveryWorker, type DeliveryWorkerOptions } from './worker.ts';
import { deriveTokenKey } from '../tracking/token.ts';
import { VerpSigner } from '../outcomes/verp.ts';
import { mailMetrics } from '../../metrics/mail-metrics.ts';
import { createSourcePicker } from '../ip-pools/source-picker.ts';

/**
 * Builds this node's delivery worker from config (relay or MX, DNS servers, MX port, EHLO name,
 * trusted CAs, MTA-STS).
 */
export function createDeliveryWorker(
  c: Container,
  workerId: string,
  overrides: Partial<DeliveryWorkerOptions> = {},
): DeliveryWorker {
  const signingKey: SigningKeyLookup = (t, d) => c.domains.signingKeyFor(t, d);
  const allowPrivate = c.config.devMode || c.config.allowPrivateMxTargets;
  // One context for every connection: building it parses the whole CA bundle.
  const secureContext = c.config.extraCaFile
    ? tls.createSecureContext({ ca: [...tls.rootCertificates, readFileSync(c.config.extraCaFile, 'utf8')] })
    : undefined;
  const dns = c.config.dnsServers ? { servers: c.config.dnsServers } : {};
  return new DeliveryWorker({
    workerId,
    database: c.database,
    suppressions: c.suppressions,
    logger: c.logger,
    ehloName: c.config.ehloName,
    leaseMs: c.config.deliveryLeaseSeconds * 1000,
    batchSize: c.config.deliveryClaimBatch,
    routing: {
      resolver: new MxResolver(dns),
      relay: c.config.relayUrl ? relayFromUrl(c.config.relayUrl) : null,
      mxPort: c.config.mxPort,
      shaping: c.pacing.data,
      allowPrivate,
      // With a relay, MX policies are the relay's business.
      mtaSts: c.config.relayUrl
        ? null
        : new MtaStsResolver({
            ...dns,
            port: c.config.mtaStsPort,
            allowPrivate,
            ...(secureContext ? { secureContext } : {}),
          }),
      ...(secureContext ? { secureContext } : {}),
    },
    signingKey,
    verp: new VerpSigner(c.masterKey),
    bounceHost: c.config.bounceHost,
    tracking: { base: c.config.publicUrl, key: deriveTokenKey(c.masterKey) },
    renderer: createRenderer(c.config.renderThreads, c.logger),
    metrics: mailMetrics(c.metrics),
    // Source addresses (IP pools, warmup), moved off addresses pacing suspended (docs/ip-pools.md).
    sources: c.config.sourceAddresses.length ? createSourcePicker(c, workerId, { suspensions: c.pacing }) : null,
    pacing: c.config.pacing ? c.pacing : null,
    ...overrides,
  });
}

/** Starts this node's delivery worker (worker role); stop() finishes in-flight sessions. */
export function start(c: Container): Stoppable {
  const worker = createDeliveryWorker(c, c.node.holder);
  // Mail accepted by this node's API or SMTP roles is claimed at once (idle-wait.ts).
  const unsubscribe = c.transmissions.onQueued(() => worker.notify());
  worker.start();
  return {
    name: 'delivery',
    stop: () => {
      unsubscribe();
      return worker.stop();
    },
    warm: () => worker.warm(),
  };
}
