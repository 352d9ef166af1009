/**
 * A delivery worker for tests, with the DKIM fixture the sink-MX tests share: a key pair for one
 * sending domain, its TXT record for the loopback DNS server (test/peers/dns-server.ts), and the
 * signing-key lookup that hands the worker that key.
 */
import type { Container } from '../../src/container.ts';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import { type DkimKeyPair, dkimDnsRecordValue, generateDkimKeyPair } from '../../src/modules/delivery/render/dkim.ts';
import type { SigningKeyLookup } from '../../src/modules/delivery/render/renderer.ts';
import type { DeliveryWorker, DeliveryWorkerOptions } from '../../src/modules/delivery/worker.ts';
import type { ZoneInput } from '../peers/dns-server.ts';

export interface TestSigningKey {
  keys: DkimKeyPair;
  /** The `<selector>._domainkey.<domain>` TXT record, to merge into a DNS zone. */
  zone: ZoneInput;
  /** The key for `domain` (Return-Path `bounces.<domain>`), null for any other From domain. */
  lookup: SigningKeyLookup;
}

/** A fresh RSA-2048 DKIM key for `domain` (default shop.test, selector s1). */
export function testSigningKey(domain = 'shop.test', selector = 's1'): TestSigningKey {
  const keys = generateDkimKeyPair();
  return {
    keys,
    zone: {
      [`${selector}._domainkey.${domain}`]: {
        TXT: [dkimDnsRecordValue(keys.publicKeyBase64).match(/.{1,255}/g) ?? []],
      },
    },
    lookup: async (_tenant, fromDomain) =>
      fromDomain === domain
        ? {
            domainName: domain,
            keySelector: selector,
            privateKeyPem: keys.privateKeyPem,
            returnPathDomain: `bounces.${domain}`,
          }
        : null,
  };
}

/**
 * Builds the worker from the container's config (as the worker role does), polling every 50 ms,
 * signing with `signing` when given, and starts it. Stop it in afterAll.
 */
export function startTestWorker(
  c: Container,
  workerId: string,
  opts: { signing?: TestSigningKey } & Partial<DeliveryWorkerOptions> = {},
): DeliveryWorker {
  const { signing, ...overrides } = opts;
  const worker = createDeliveryWorker(c, workerId, {
    pollMs: 50,
    ...(signing ? { signingKey: signing.lookup } : {}),
    ...overrides,
  });
  worker.start();
  return worker;
}
