import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';

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

export function registerDomainRoutes(app: TypedApp, c: Container) {
  app.post(
    '/v1/sending-domains',
    {
      config: {
        scopes: SCOPE,
        openapi: { errors: ['domain_limit_reached'], request: { domain: 'mail.example.com' } },
      },
      schema: {
        tags: TAGS,
        operationId: 'sendingDomains.create',
        summary: 'Add a sending domain (makes its DKIM key and lists the DNS records to publish)',
        headers: IdempotencyHeader,
        body: Type.Object({ domain: Type.String({ minLength: 1, maxLength: 253 }) }, { additionalProperties: false }),
        response: { 201: SendingDomain, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const tenantId = authOf(req).tenantId;
      const prepared = await c.domains.prepare(tenantId, req.body);
      return replyIdempotent(c, req, reply, async (trx) => ({
        status: 201,
        body: await c.domains.create(tenantId, prepared, trx),
      }));
    },
  );

  app.get(
    '/v1/sending-domains',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'sendingDomains.list',
        summary: 'List sending domains',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(SendingDomain), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.domains.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.get(
    '/v1/sending-domains/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'sendingDomains.get',
        summary: 'Get a sending domain with its DNS records',
        params: IdParams,
        response: { 200: SendingDomain, ...errorResponses(404) },
      },
    },
    async (req) => c.domains.get(authOf(req).tenantId, req.params.id),
  );

  app.delete(
    '/v1/sending-domains/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'sendingDomains.delete',
        summary: 'Delete a sending domain and its DKIM key',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await c.domains.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );

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
