import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses, pageOf, pageQuery } from '../../http/schemas.ts';
import { EventSchema, EventsQuery } from './events.schema.ts';

export function registerEventRoutes(app: TypedApp, c: Container) {
  app.addSchema(EventSchema);
  app.get(
    '/v1/events',
    {
      config: { scopes: ['read:events'] },
      schema: {
        tags: ['Events'],
        summary: 'List events, newest first (filters combine with AND)',
        querystring: EventsQuery,
        response: { 200: pageOf(Type.Ref('Event')), ...errorResponses() },
      },
    },
    async (req) => c.events.list(authOf(req).tenantId, pageQuery(req.query)),
  );
}
