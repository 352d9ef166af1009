import { Type } from '@sinclair/typebox';
import { PageQuery } from '../../http/schemas.ts';
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
    role: Type.Optional(
      Type.Union([Type.Literal('to'), Type.Literal('cc'), Type.Literal('bcc')], {
        description: "Only on a group message's events (recipients with cc or bcc): how the recipient was addressed.",
      }),
    ),
  },
  { $id: 'Event' },
);

/** GET /v1/events filters; the dashboard's event list takes the same. */
export const EventsQuery = Type.Object(
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
