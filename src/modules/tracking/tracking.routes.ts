import type { RateLimiter } from '../../rate-limit/rate-limiter.ts';
import type { Registry } from 'prom-client';
import type { DomainsService } from '../domains/domains.service.ts';
import type { Database } from '../../db/index.ts';
import type { Config } from '../../config.ts';
/**
 * Tracking routes (docs/tracking.md). Public, no API key: `GET /o/<token>` (open pixel),
 * `GET /c/<token>` (click: 302 to the link's URL, carried by the token or named by it: token.ts),
 * `GET /u/<token>` (a page with a confirm button; changes nothing, since link scanners follow
 * GETs) and `POST /u/<token>` (RFC 8058 one-click from the mailbox provider, or the page's
 * button). A bad token, a token whose message no longer exists, a version 2 click token naming
 * no link row and a token on a host that does not honour it (another tenant's tracking host
 * name, or a name that is nobody's) get the same 404, so the routes say nothing about messages.
 * And the tenant's defaults: `GET`/`PATCH /v1/tracking-settings` (scope manage:sending-domains).
 */
import { mailMetrics } from '../../metrics/mail-metrics.ts';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { addressBudgetKey } from '../../lib/client-address.ts';
import { publicHostOf } from '../domains/tracking-host.ts';
import { errorResponses } from '../../http/schemas.ts';
import { getTrackingSettings, patchTrackingSettings } from './settings.ts';
import { deriveTokenKey, type TokenKind, type TrackingToken, verifyToken } from './token.ts';
import { type ClientInfo, type HonouredTenants, messageTenant, type TrackingService } from './tracking.service.ts';
import { unsubscribeDonePage, unsubscribePage } from './unsubscribe-page.ts';
import { redirectTarget } from './redirect-target.ts';

/** What the tracking routes (opens, clicks, unsubscribes, tracking settings) need. */
export interface TrackingRoutesDeps {
  config: Pick<Config, 'publicUrl' | 'trackingRateLimitBurst' | 'trackingRateLimitRps'>;
  database: Database;
  domains: Pick<DomainsService, 'trackingHosts'>;
  masterKey: Buffer;
  metrics: Registry;
  rateLimiter: Pick<RateLimiter, 'check'>;
  tracking: TrackingService;
  /** The accept path's cache of tracking defaults (the transmissions service's). */
  transmissions: { trackingDefaults: { forget(tenantId: string): void } };
}

/** A transparent 1x1 GIF (43 bytes). */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const SCOPE = ['manage:sending-domains'] as const;
const TokenParams = Type.Object({ token: Type.String({ maxLength: 8000 }) });

const PerType = Type.Object(
  { transactional: Type.Boolean(), marketing: Type.Boolean() },
  { additionalProperties: false },
);
const PerTypePatch = Type.Partial(PerType, { additionalProperties: false });
const Settings = Type.Object({ open_tracking: PerType, click_tracking: PerType });
const SettingsPatch = Type.Object(
  { open_tracking: Type.Optional(PerTypePatch), click_tracking: Type.Optional(PerTypePatch) },
  { additionalProperties: false },
);

function client(req: FastifyRequest): ClientInfo {
  const ua = req.headers['user-agent'];
  return { ip: req.ip, userAgent: (typeof ua === 'string' ? ua : '').slice(0, 512) };
}

function notFound(reply: FastifyReply) {
  return reply.code(404).header('Cache-Control', 'no-store').type('text/plain; charset=utf-8').send('Not Found');
}

export async function registerTrackingRoutes(app: TypedApp, c: TrackingRoutesDeps): Promise<void> {
  const key = deriveTokenKey(c.masterKey);
  const tracking = c.tracking;
  const counted = mailMetrics(c.metrics).trackingEvents;
  const bucket = { rps: c.config.trackingRateLimitRps, burst: c.config.trackingRateLimitBurst };
  /**
   * Every tracking request draws from its client address's bucket (an IPv6 client by its /64)
   * first, before the token is looked at, so a 429 says nothing about tokens or messages. Over the budget: 429 with the
   * bucket's Retry-After, nothing recorded (docs/tracking.md "Rate limits"). Returns whether the
   * request was refused (the reply is then sent).
   */
  const overBudget = async (req: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    const d = await c.rateLimiter.check(`track:${addressBudgetKey(req.ip)}`, bucket);
    if (d.allowed) return false;
    await reply
      .code(429)
      .header('Retry-After', String(d.retryAfterSeconds))
      .header('Cache-Control', 'no-store')
      .type('text/plain; charset=utf-8')
      .send('Too Many Requests');
    return true;
  };
  const token = (raw: string, kind: TokenKind): TrackingToken | null => verifyToken(key, raw, kind);
  const publicHost = publicHostOf(c.config.publicUrl);
  /**
   * Whose tokens the request's host name honours (docs/tracking.md "Tracking base"): every
   * tenant's on the public URL's host, only its owners' on a tenant's tracking host name, nobody's
   * elsewhere. A token on a host that does not honour it gets the 404 of an unknown token.
   * Asked only once a token verified, so junk costs no lookup.
   */
  const honoured = (req: FastifyRequest): Promise<HonouredTenants> | null => {
    const host = req.hostname.toLowerCase().replace(/\.$/, '');
    return host === publicHost ? null : c.domains.trackingHosts.of(host);
  };

  app.get(
    '/v1/tracking-settings',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['Tracking'],
        operationId: 'trackingSettings.get',
        summary: "Get the tenant's tracking defaults per mail type",
        response: { 200: Settings, ...errorResponses() },
      },
    },
    async (req) => getTrackingSettings(c.database.db, authOf(req).tenantId),
  );

  app.patch(
    '/v1/tracking-settings',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['Tracking'],
        operationId: 'trackingSettings.update',
        summary: "Change the tenant's tracking defaults (fields not given keep their value)",
        body: SettingsPatch,
        response: { 200: Settings, ...errorResponses(422) },
      },
    },
    async (req) =>
      patchTrackingSettings(c.database.db, authOf(req).tenantId, req.body).finally(() =>
        c.transmissions.trackingDefaults.forget(authOf(req).tenantId),
      ),
  );

  // Own context: the unsubscribe POST takes form bodies (RFC 8058 allows urlencoded and multipart).
  await app.register(async (ctx) => {
    const pub = ctx.withTypeProvider<TypeBoxTypeProvider>();
    pub.removeContentTypeParser(['multipart/form-data', 'text/plain']);
    pub.addContentTypeParser(
      ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'],
      { parseAs: 'string', bodyLimit: 8192 },
      (_req, body, done) => done(null, body),
    );
    const common = { config: { public: true }, schema: { hide: true, params: TokenParams } };

    pub.get('/o/:token', common, async (req, reply) => {
      if (await overBudget(req, reply)) return reply;
      const t = token(req.params.token, 'open');
      const tenants = t && (await honoured(req));
      if (!t || tenants?.size === 0) return notFound(reply);
      if (!(await tracking.record('open', t.messageId, client(req), undefined, tenants))) return notFound(reply);
      counted.inc({ kind: 'open' });
      return reply.header('Cache-Control', 'no-store, max-age=0').type('image/gif').send(PIXEL);
    });

    pub.get('/c/:token', common, async (req, reply) => {
      if (await overBudget(req, reply)) return reply;
      const t = token(req.params.token, 'click');
      // Version 2 names a row of the transmission's link table, version 1 carries its URL.
      const target =
        t?.ref !== undefined ? { link: t.link ?? 0, ref: t.ref } : t?.url ? { link: t.link ?? 0, url: t.url } : null;
      const tenants = t && target && (await honoured(req));
      if (!t || !target || tenants?.size === 0) return notFound(reply);
      const url = (await tracking.record('click', t.messageId, client(req), target, tenants))?.url;
      if (!url) return notFound(reply);
      counted.inc({ kind: 'click' });
      return reply
        .code(302)
        .header('Location', redirectTarget(url))
        .header('Cache-Control', 'no-store')
        .header('Referrer-Policy', 'no-referrer')
        .send();
    });

    pub.get('/u/:token', common, async (req, reply) => {
      if (await overBudget(req, reply)) return reply;
      const t = token(req.params.token, 'unsubscribe');
      const tenants = t && (await honoured(req));
      if (!t || tenants?.size === 0) return notFound(reply);
      // The page records nothing, so its message is looked up only on a tracking host name.
      if (tenants && !tenants.has((await messageTenant(c.database.db, t.messageId)) ?? '')) return notFound(reply);
      return page(reply, unsubscribePage());
    });

    pub.post('/u/:token', common, async (req, reply) => {
      if (await overBudget(req, reply)) return reply;
      const t = token(req.params.token, 'unsubscribe');
      const tenants = t && (await honoured(req));
      if (!t || tenants?.size === 0) return notFound(reply);
      const body = typeof req.body === 'string' ? req.body : '';
      // RFC 8058: the provider POSTs exactly `List-Unsubscribe=One-Click`; our page posts `confirm=1`.
      const oneClick =
        /(^|&|\r?\n)List-Unsubscribe=One-Click(&|\r?\n|$)/.test(body) ||
        /name="List-Unsubscribe"\s+One-Click/.test(body);
      const method = oneClick ? 'one_click' : 'page';
      if (!(await tracking.unsubscribe(t.messageId, method, client(req), tenants))) return notFound(reply);
      counted.inc({ kind: 'unsubscribe' });
      if (oneClick) return reply.code(200).header('Cache-Control', 'no-store').send();
      return page(reply, unsubscribeDonePage());
    });
  });
}

function page(reply: FastifyReply, html: string) {
  return reply
    .header('Cache-Control', 'no-store')
    .header('Referrer-Policy', 'no-referrer')
    .header(
      'Content-Security-Policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    )
    .type('text/html; charset=utf-8')
    .send(html);
}
