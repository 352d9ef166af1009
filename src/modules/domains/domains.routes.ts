import type { DomainsService } from './domains.service.ts';
import type { Database } from '../../db/index.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { type TSchema, Type } from '@sinclair/typebox';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdParams } from '../../http/schemas.ts';

/** What the sending-domain routes (/v1 and dashboard) need. */
export interface DomainRoutesDeps {
  domains: DomainsService;
  idempotency: IdempotencyService;
  database: Database;
}

const SCOPE = ['manage:sending-domains'] as const;
const TAGS = ['Sending domains'];
const Status = Type.Union([Type.Literal('pending'), Type.Literal('verified'), Type.Literal('failed')]);
const NullableString = Type.Union([Type.String(), Type.Null()]);

const DnsRecord = Type.Object({
  purpose: Type.Union([
    Type.Literal('dkim'),
    Type.Literal('spf'),
    Type.Literal('return_path'),
    Type.Literal('dmarc'),
    Type.Literal('tracking'),
  ]),
  type: Type.Union([Type.Literal('TXT'), Type.Literal('CNAME')]),
  name: Type.String({ description: 'Fully qualified name to publish the record at.' }),
  value: Type.String(),
  required: Type.Boolean({ description: 'Whether the domain can only be verified with this record (DKIM).' }),
  status: Status,
  last_checked_at: NullableString,
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why the last check did not verify it.' }),
});

const SendingDomain = Type.Object({
  id: Type.String(),
  domain: Type.String(),
  status: Status,
  status_reason: NullableString,
  dkim_selector: Type.String(),
  return_path_domain: Type.String(),
  dns_records: Type.Array(DnsRecord),
  verified_at: NullableString,
  created_at: Type.String(),
  updated_at: Type.String(),
});

const CreateDomainBody = Type.Object(
  { domain: Type.String({ minLength: 1, maxLength: 253 }) },
  { additionalProperties: false },
);

/** The sending-domain use cases the /v1 and dashboard routes share (http/crud-routes.ts). */
export const SENDING_DOMAINS: CrudResource<typeof CreateDomainBody, TSchema, DomainRoutesDeps> = {
  createBody: CreateDomainBody,
  create: async (c, caller, input) => {
    // The DKIM key is made and the limits checked before the idempotent transaction opens.
    const prepared = await c.domains.prepare(caller.tenantId, input);
    return (db) => c.domains.create(caller.tenantId, prepared, db);
  },
  service: (c) => c.domains,
};

export function registerDomainRoutes(app: TypedApp, c: DomainRoutesDeps) {
  registerCrudRoutes(app, c, {
    ...SENDING_DOMAINS,
    path: '/v1/sending-domains',
    scopes: SCOPE,
    tags: TAGS,
    view: SendingDomain,
    resource: 'sendingDomains',
    summaries: {
      create: 'Add a sending domain (makes its DKIM key and lists the DNS records to publish)',
      list: 'List sending domains',
      get: 'Get a sending domain with its DNS records',
      delete: 'Delete a sending domain and its DKIM key',
    },
    docs: { create: { errors: ['domain_limit_reached'], request: { domain: 'mail.example.com' } } },
  });

  app.post(
    '/v1/sending-domains/:id/verify',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'sendingDomains.verify',
        summary: 'Check the DNS records now and update the statuses',
        params: IdParams,
        response: { 200: SendingDomain, ...errorResponses(404) },
      },
    },
    async (req) => c.domains.verify(authOf(req).tenantId, req.params.id),
  );
  // The tracking host name (domains/tracking-host.ts, docs/domains.md "Tracking host name").
  app.patch(
    '/v1/sending-domains/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'sendingDomains.update',
        summary: 'Set or remove the tracking host name (a CNAME to the public URL host, listed in dns_records)',
        params: IdParams,
        body: Type.Object(
          { tracking_hostname: Type.Union([Type.String({ minLength: 1, maxLength: 253 }), Type.Null()]) },
          { additionalProperties: false },
        ),
        response: { 200: SendingDomain, ...errorResponses(404, 422) },
      },
    },
    async (req) => c.domains.setTrackingHostname(authOf(req).tenantId, req.params.id, req.body.tracking_hostname),
  );
}
