import { Type } from '@sinclair/typebox';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses, pageOf, pageQuery } from '../../http/schemas.ts';
import { EventSchema, EventsQuery } from './events.schema.ts';
import type { EventsService } from './events.service.ts';

/** GET /v1/events answer for the OpenAPI document. */
const EVENTS_PAGE_EXAMPLE = {
  data: [
    {
      id: '0193a5b2-5555-7d4a-9f3b-2c8e4d6a1b90',
      type: 'message.delivered',
      created_at: '2026-11-26T10:00:02.000Z',
      tenant_id: '0193a5b2-1111-7d4a-9f3b-2c8e4d6a1b90',
      transmission_id: '0193a5b2-2222-7d4a-9f3b-2c8e4d6a1b90',
      message_id: '0193a5b2-3333-7d4a-9f3b-2c8e4d6a1b90',
      recipient: 'ann@example.com',
      mail_type: 'transactional',
      tags: ['orders'],
      metadata: { order: '1234' },
      data: { mx_host: 'mx1.example.com', smtp_response: '250 2.0.0 Ok: queued as 4Xk2', tls: true, attempt: 1 },
    },
  ],
  next_cursor: 'eyJ0IjoiMjAyNi0xMS0yNlQxMDowMDowMi4wMDBaIn0.c2ln',
};

export function registerEventRoutes(app: TypedApp, c: { events: Pick<EventsService, 'list'> }) {
  app.addSchema(EventSchema);
  app.get(
    '/v1/events',
    {
      config: { scopes: ['read:events'], openapi: { responses: { 200: EVENTS_PAGE_EXAMPLE } } },
      schema: {
        tags: ['Events'],
        operationId: 'events.list',
        summary: 'List events, newest first (filters combine with AND)',
        querystring: EventsQuery,
        response: { 200: pageOf(Type.Ref('Event')), ...errorResponses() },
      },
    },
    async (req) => c.events.list(authOf(req).tenantId, pageQuery(req.query)),
  );
}
