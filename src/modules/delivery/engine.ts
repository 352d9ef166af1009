import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/index.ts';
import type { NodeSelf } from '../../lib/node-identity.ts';
import type { Stoppable } from '../../engine.ts';
import { MtaStsResolver } from './smtp/mta-sts.ts';
import { MxResolver } from './mx-resolver.ts';
import { createRenderer } from './render/render-pool.ts';
import type { SigningKeyLookup } from './render/renderer.ts';
import { relayFromUrl } from '../../config/relay-url.ts';
import { DeliveryWorker, type DeliveryWorkerOptions } from './worker.ts';
import { deriveTokenKey } from '../tracking/token.ts';
import { VerpSigner } from '../outcomes/verp.ts';
import { mailMetrics } from '../../metrics/mail-metrics.ts';
import { createSourcePicker } from '../ip-pools/source-picker.ts';
import type { DomainsService } from '../domains/domains.service.ts';
import type { ConnectionSlots } from '../pacing/connection-slots.ts';
import type { PacingService } from '../pacing/pacing.service.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';

/** What the delivery engine needs of its node (the container satisfies it). */
export interface DeliveryDeps {
  config: Pick<
    Config,
    | 'allowPrivateMxTargets'
    | 'bounceHost'
    | 'deliveryClaimBatch'
    | 'deliveryLeaseSeconds'
    | 'devMode'
    | 'dnsServers'
    | 'ehloName'
    | 'extraCaFile'
    | 'mtaStsPort'
    | 'mxPort'
    | 'pacing'
    | 'publicUrl'
    | 'relayUrl'
    | 'renderThreads'
    | 'sourceAddresses'
    | 'sourceDedications'
  >;
  database: Database;
  logger: Logger;
  metrics: Registry;
  masterKey: Buffer;
  node: NodeSelf;
  domains: Pick<DomainsService, 'signingKeyFor'>;
  pacing: PacingService;
  suppressions: SuppressionsService;
  /** This run's connection slots (the container chooses where they are kept). */
  connectionSlots(holder: string): ConnectionSlots;
  /** Mail accepted by this node (the transmissions service): claimed at once. */
  transmissions: { onQueued(listener: () => void): () => void };
}

/**
 * Builds this node's delivery worker from config (relay or MX, DNS servers, MX port, EHLO name,
 * trusted CAs, MTA-STS).
 */
export function createDeliveryWorker(
  c: DeliveryDeps,
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
    slots: c.connectionSlots(workerId),
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
export function start(c: DeliveryDeps): Stoppable {
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
