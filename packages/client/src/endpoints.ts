import type { ApiPath, HttpMethod } from './types.ts';

/**
 * Every /v1 operation the client calls, by client method name. The paths are typed against the
 * generated OpenAPI types (a path that is not in the document does not compile), and
 * test/client/coverage.test.ts checks this table against the live document both ways: an
 * endpoint without a client method, or a method without an endpoint, fails the suite.
 */
export const ENDPOINTS = {
  'transmissions.send': ['POST', '/v1/transmissions'],
  'transmissions.get': ['GET', '/v1/transmissions/{id}'],
  'messages.get': ['GET', '/v1/messages/{id}'],
  'suppressions.upsert': ['POST', '/v1/suppressions'],
  'suppressions.list': ['GET', '/v1/suppressions'],
  'suppressions.get': ['GET', '/v1/suppressions/{id}'],
  'suppressions.delete': ['DELETE', '/v1/suppressions/{id}'],
  'webhooks.create': ['POST', '/v1/webhooks'],
  'webhooks.list': ['GET', '/v1/webhooks'],
  'webhooks.get': ['GET', '/v1/webhooks/{id}'],
  'webhooks.update': ['PATCH', '/v1/webhooks/{id}'],
  'webhooks.delete': ['DELETE', '/v1/webhooks/{id}'],
  'webhooks.rotateSecret': ['POST', '/v1/webhooks/{id}/rotate-secret'],
  'webhooks.test': ['POST', '/v1/webhooks/{id}/test'],
  'webhooks.deliveries': ['GET', '/v1/webhooks/{id}/deliveries'],
  'events.list': ['GET', '/v1/events'],
  'apiKeys.create': ['POST', '/v1/api-keys'],
  'apiKeys.list': ['GET', '/v1/api-keys'],
  'apiKeys.delete': ['DELETE', '/v1/api-keys/{id}'],
  'smtpCredentials.create': ['POST', '/v1/smtp-credentials'],
  'smtpCredentials.list': ['GET', '/v1/smtp-credentials'],
  'smtpCredentials.delete': ['DELETE', '/v1/smtp-credentials/{id}'],
  'sendingDomains.create': ['POST', '/v1/sending-domains'],
  'sendingDomains.list': ['GET', '/v1/sending-domains'],
  'sendingDomains.get': ['GET', '/v1/sending-domains/{id}'],
  'sendingDomains.delete': ['DELETE', '/v1/sending-domains/{id}'],
  'sendingDomains.verify': ['POST', '/v1/sending-domains/{id}/verify'],
  'sendingDomains.update': ['PATCH', '/v1/sending-domains/{id}'],
  'templates.create': ['POST', '/v1/templates'],
  'templates.list': ['GET', '/v1/templates'],
  'templates.get': ['GET', '/v1/templates/{id}'],
  'templates.update': ['PATCH', '/v1/templates/{id}'],
  'templates.delete': ['DELETE', '/v1/templates/{id}'],
  'templates.publish': ['POST', '/v1/templates/{id}/publish'],
  'templates.versions': ['GET', '/v1/templates/{id}/versions'],
  'templates.preview': ['POST', '/v1/templates/{id}/preview'],
  'trackingSettings.get': ['GET', '/v1/tracking-settings'],
  'trackingSettings.update': ['PATCH', '/v1/tracking-settings'],
  'ipPools.create': ['POST', '/v1/ip-pools'],
  'ipPools.list': ['GET', '/v1/ip-pools'],
  'ipPools.get': ['GET', '/v1/ip-pools/{id}'],
  'ipPools.update': ['PATCH', '/v1/ip-pools/{id}'],
  'ipPools.delete': ['DELETE', '/v1/ip-pools/{id}'],
  'warmupPolicies.create': ['POST', '/v1/warmup-policies'],
  'warmupPolicies.list': ['GET', '/v1/warmup-policies'],
  'warmupPolicies.get': ['GET', '/v1/warmup-policies/{id}'],
  'warmupPolicies.update': ['PATCH', '/v1/warmup-policies/{id}'],
  'warmupPolicies.delete': ['DELETE', '/v1/warmup-policies/{id}'],
  'pacing.listSites': ['GET', '/v1/pacing/sites'],
  'pacing.getSite': ['GET', '/v1/pacing/sites/{site}'],
  'pacing.putSite': ['PUT', '/v1/pacing/sites/{site}'],
  'pacing.listSuspensions': ['GET', '/v1/pacing/suspensions'],
} as const satisfies Record<string, readonly [HttpMethod, ApiPath]>;

export type EndpointName = keyof typeof ENDPOINTS;

/**
 * Client methods that are not one endpoint each: `suppressions.import` is the multipart form of
 * `suppressions.upsert`'s POST, and the iterate helpers walk a list endpoint's pages.
 */
export const HELPERS = {
  'suppressions.import': 'suppressions.upsert',
  'suppressions.iterate': 'suppressions.list',
  'webhooks.iterate': 'webhooks.list',
  'webhooks.iterateDeliveries': 'webhooks.deliveries',
  'events.iterate': 'events.list',
  'apiKeys.iterate': 'apiKeys.list',
  'smtpCredentials.iterate': 'smtpCredentials.list',
  'sendingDomains.iterate': 'sendingDomains.list',
  'templates.iterate': 'templates.list',
  'templates.iterateVersions': 'templates.versions',
  'ipPools.iterate': 'ipPools.list',
  'warmupPolicies.iterate': 'warmupPolicies.list',
} as const satisfies Record<string, EndpointName>;

/** `/v1/webhooks/{id}` with `{ id }` (or `/v1/pacing/sites/{site}` with `{ site }`) filled in (URI-encoded). */
export function fillPath(path: string, params: Record<string, string>): string {
  return path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const v = params[name];
    if (v === undefined || v === '') throw new TypeError(`Postyard: ${name} is required for ${path}`);
    return encodeURIComponent(v);
  });
}

/** POSTs whose route honours Idempotency-Key: the client always sends one (checked against the document). */
export const KEYED_POSTS: ReadonlySet<EndpointName> = new Set<EndpointName>([
  'transmissions.send',
  'suppressions.upsert',
  'webhooks.create',
  'webhooks.test',
  'apiKeys.create',
  'smtpCredentials.create',
  'sendingDomains.create',
  'templates.create',
  'ipPools.create',
  'warmupPolicies.create',
]);

/**
 * The other POSTs, each with a decision: repeating `sendingDomains.verify` only checks DNS again,
 * `templates.publish` publishes the same draft again and `templates.preview` only renders;
 * repeating `webhooks.rotateSecret` would rotate twice and drop the secret receivers still use, so
 * it is retried only when the request provably never reached the server.
 */
export const UNKEYED_POSTS: Readonly<Record<string, 'repeatable' | 'unsent-only'>> = {
  'sendingDomains.verify': 'repeatable',
  'webhooks.rotateSecret': 'unsent-only',
  'templates.publish': 'repeatable',
  'templates.preview': 'repeatable',
} satisfies Partial<Record<EndpointName, 'repeatable' | 'unsent-only'>>;
