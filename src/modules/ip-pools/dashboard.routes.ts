import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Container } from '../../container.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { IdParams, PageQuery, pageQuery } from '../../http/schemas.ts';
import { sessionOf } from '../dashboard/session.plugin.ts';
import { warmupProgress } from '../warmup/progress.ts';

/**
 * The dashboard's IP pool and warmup calls (docs/dashboard.md): read-only views of the
 * /v1/ip-pools use cases, authenticated by the session, and the warmup progress per address.
 * Pools are changed through the API (docs/ip-pools.md).
 */
const P = '/dashboard/api/ip-pools';
const config = { public: true, dashboard: 'session' } as const;
const tenant = (req: FastifyRequest) => sessionOf(req).tenantId;

export function registerIpPoolDashboardRoutes(app: TypedApp, c: Container) {
  app.get(P, { config, schema: { hide: true, querystring: Type.Object(PageQuery) } }, async (req) => {
    const q = pageQuery(req.query);
    return c.ipPools.list(tenant(req), q.limit, q.cursor);
  });
  app.get(`${P}/:id`, { config, schema: { hide: true, params: IdParams } }, async (req) => {
    const pool = await c.ipPools.get(tenant(req), req.params.id);
    const rules = await c.sourceAddresses.rules();
    return { pool, warmup: await warmupProgress(c.database.db, tenant(req), Date.now(), rules, pool.id) };
  });
  app.get('/dashboard/api/warmup', { config, schema: { hide: true } }, async (req) => ({
    data: await warmupProgress(c.database.db, tenant(req), Date.now(), await c.sourceAddresses.rules()),
  }));
}
