import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import { EVENT_TYPES } from './events.types.ts';

const Nullable = (s: ReturnType<typeof Type.String>) => Type.Union([s, Type.Null()]);

/** The public event (docs/api.md "Events"); webhook bodies carry the same object. */
export const EventSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    type: Type.String({ enum: [...EVENT_TYPES] }),
    created_at: Type.String({ format: 'date-time' }),
    tenant_id: Type.String(),
    transmission_id: Nullable(Type.String()),
    message_id: Nullable(Type.String()),
    recipient: Nullable(Type.String()),
    mail_type: Nullable(Type.String()),
    tags: Type.Array(Type.String()),
    metadata: Type.Record(Type.String(), Type.String()),
    data: Type.Object({}, { additionalProperties: true, description: 'Type-specific details (see docs/webhooks.md).' }),
  },
  { $id: 'Event' },
);

const EventsQuery = Type.Object(
  {
    ...PageQuery,
    type: Type.Optional(Type.String({ maxLength: 500, description: 'Comma-separated event types.' })),
    recipient: Type.Optional(Type.String({ maxLength: 320 })),
    transmission_id: Type.Optional(Type.String({ maxLength: 64 })),
    message_id: Type.Optional(Type.String({ maxLength: 64 })),
    tag: Type.Optional(Type.String({ maxLength: 64 })),
    from: Type.Optional(Type.String({ maxLength: 40, description: 'Inclusive lower bound on created_at (ISO-8601).' })),
    to: Type.Optional(Type.String({ maxLength: 40, description: 'Exclusive upper bound on created_at (ISO-8601).' })),
  },
  { additionalProperties: false },
);

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
