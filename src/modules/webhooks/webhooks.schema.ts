import { type Static, Type } from '@sinclair/typebox';

/**
 * Route schemas (they drive Ajv validation and the OpenAPI document). Structural rules live
 * here; event-type names and the URL (syntax and SSRF policy) are checked by the service so the
 * 422 entries can name the exact field.
 */
export const MAX_BATCH_SIZE = 1000;
export const MAX_BATCH_WAIT_MS = 60_000;

const Nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()]);

const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  url: Type.String({
    minLength: 1,
    maxLength: 2048,
    description: 'http:// or https:// target; private addresses are refused.',
  }),
  events: Type.Array(Type.String({ maxLength: 64 }), {
    minItems: 1,
    maxItems: 50,
    description: 'Event types to receive, or ["*"] for all of them.',
  }),
  dispatch_policy: Type.Union([Type.Literal('single'), Type.Literal('batch')]),
  batch_max_size: Type.Integer({ minimum: 1, maximum: MAX_BATCH_SIZE }),
  batch_max_wait_ms: Type.Integer({ minimum: 0, maximum: MAX_BATCH_WAIT_MS }),
  enabled: Type.Boolean(),
};

export const CreateWebhookBody = Type.Object(
  {
    url: fields.url,
    name: Type.Optional(fields.name),
    events: Type.Optional(fields.events),
    dispatch_policy: Type.Optional(fields.dispatch_policy),
    batch_max_size: Type.Optional(fields.batch_max_size),
    batch_max_wait_ms: Type.Optional(fields.batch_max_wait_ms),
    enabled: Type.Optional(fields.enabled),
  },
  { additionalProperties: false },
);
export type CreateWebhookInput = Static<typeof CreateWebhookBody>;

export const UpdateWebhookBody = Type.Partial(CreateWebhookBody, { additionalProperties: false });
export type UpdateWebhookInput = Static<typeof UpdateWebhookBody>;

export const Webhook = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    url: Type.String(),
    events: Type.Array(Type.String()),
    dispatch_policy: fields.dispatch_policy,
    batch_max_size: Type.Integer(),
    batch_max_wait_ms: Type.Integer(),
    enabled: Type.Boolean(),
    status: Type.Union([Type.Literal('active'), Type.Literal('disabled')]),
    disabled_reason: Nullable(Type.String({ description: 'Why the webhook is disabled, when it is.' })),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Webhook' },
);
export type WebhookView = Static<typeof Webhook>;

export const CreatedWebhook = Type.Object({
  ...Webhook.properties,
  secret: Nullable(Type.String({ description: 'whsec_... signing secret: shown once, null in replays.' })),
});
export type CreatedWebhookView = Static<typeof CreatedWebhook>;

export const RotatedSecret = Type.Object({
  secret: Type.String({
    description: 'The new whsec_... secret; the previous one keeps signing until previous_secret_expires_at.',
  }),
  previous_secret_expires_at: Type.String({ format: 'date-time' }),
});

export const TestResult = Type.Object({
  delivered: Type.Boolean(),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  duration_ms: Type.Integer(),
  error: Nullable(Type.String()),
});
export type TestResultView = Static<typeof TestResult>;

export const Delivery = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    webhook_id: Type.String(),
    created_at: Type.String({ format: 'date-time', description: 'When the attempt was made.' }),
    outcome: Type.Union([Type.Literal('delivered'), Type.Literal('retrying'), Type.Literal('failed')], {
      description: 'retrying: failed, another attempt is scheduled; failed: no more attempts.',
    }),
    status_code: Type.Union([Type.Integer(), Type.Null()]),
    duration_ms: Type.Integer(),
    error: Nullable(Type.String()),
    attempt: Type.Integer(),
    next_attempt_at: Nullable(Type.String({ format: 'date-time' })),
    batch_id: Nullable(Type.String()),
    event_ids: Type.Array(Type.String()),
    test: Type.Boolean({ description: 'Made by POST /v1/webhooks/{id}/test.' }),
  },
  { $id: 'WebhookDelivery' },
);
export type DeliveryView = Static<typeof Delivery>;
