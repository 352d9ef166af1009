import { Type } from '@sinclair/typebox';

/**
 * Structural rules (types, sizes, unknown fields) live in these schemas and are checked by Ajv
 * before the handler; semantic rules (address syntax, header injection, metadata size) live in
 * transmissions.validate.ts. Both produce 422 entries that name the field.
 */
export const MAX_RECIPIENTS = 10_000;
export const MAX_TAGS = 10;
export const MAX_METADATA_KEYS = 50;
export const MAX_METADATA_BYTES = 10 * 1024;
/** A transmission with `cc` or `bcc` recipients (a group message) has at most this many recipients. */
export const MAX_GROUP_RECIPIENTS = 50;

export const Role = Type.Union([Type.Literal('to'), Type.Literal('cc'), Type.Literal('bcc')]);

const StringMap = (maxProps: number) =>
  Type.Record(Type.String({ maxLength: 128 }), Type.String({ maxLength: 4096 }), { maxProperties: maxProps });

export const Recipient = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320 }),
    name: Type.Optional(Type.String({ maxLength: 256 })),
    substitution_data: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 200 })),
    metadata: Type.Optional(StringMap(MAX_METADATA_KEYS)),
    role: Type.Optional(
      Type.Union([Type.Literal('to'), Type.Literal('cc'), Type.Literal('bcc')], {
        description:
          'to (default), cc or bcc. Any cc or bcc recipient makes a group message: every copy shows the same To and Cc headers; bcc recipients are in none.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Attachment = Type.Object(
  {
    filename: Type.String({ minLength: 1, maxLength: 255 }),
    content_type: Type.String({ minLength: 3, maxLength: 255 }),
    data: Type.String({ description: 'Base64-encoded content' }),
    content_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description:
          'Makes the attachment an inline part of the HTML (multipart/related), referenced as cid:<content_id>',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Content = Type.Object(
  {
    // Required unless template_id is given (checked in transmissions.validate.ts).
    subject: Type.Optional(Type.String({ minLength: 1, maxLength: 998 })),
    text: Type.Optional(Type.String()),
    html: Type.Optional(Type.String()),
    from: Type.Optional(Type.String({ maxLength: 512 })),
    reply_to: Type.Optional(Type.String({ maxLength: 512 })),
    headers: Type.Optional(StringMap(50)),
    attachments: Type.Optional(Type.Array(Attachment, { maxItems: 50 })),
    template_id: Type.Optional(Type.String({ maxLength: 64, description: 'A stored template (docs/templates.md)' })),
    use_draft: Type.Optional(Type.Boolean({ description: "With template_id: send the template's draft version" })),
  },
  { additionalProperties: false },
);

export const Options = Type.Object(
  {
    mail_type: Type.Optional(Type.Union([Type.Literal('transactional'), Type.Literal('marketing')])),
    tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: MAX_TAGS })),
    metadata: Type.Optional(StringMap(MAX_METADATA_KEYS)),
    sandbox: Type.Optional(Type.Boolean()),
    open_tracking: Type.Optional(Type.Boolean()),
    click_tracking: Type.Optional(Type.Boolean()),
    start_time: Type.Optional(Type.String({ format: 'date-time' })),
    ip_pool: Type.Optional(
      Type.String({ minLength: 1, maxLength: 128, description: "An IP pool's id or name (docs/ip-pools.md)" }),
    ),
  },
  { additionalProperties: false },
);

export const TransmissionBody = Type.Object(
  {
    recipients: Type.Array(Recipient, { minItems: 1, maxItems: MAX_RECIPIENTS }),
    content: Content,
    /** Data for every recipient, under each recipient's own (docs/templates.md "Data precedence"). */
    substitution_data: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 200 })),
    options: Type.Optional(Options),
  },
  { additionalProperties: false },
);

export const NotQueuedItem = Type.Object({
  email: Type.String(),
  status: Type.Union([Type.Literal('suppressed'), Type.Literal('duplicate')]),
  reason: Type.String(),
});

export const AcceptedTransmission = Type.Object({
  transmission_id: Type.String({ format: 'uuid' }),
  items: Type.Array(NotQueuedItem),
  total_accepted_recipients: Type.Integer(),
  total_rejected_recipients: Type.Integer(),
});

export const MessageSummary = Type.Object({
  id: Type.String(),
  recipient: Type.String(),
  role: Role,
  state: Type.String(),
  attempt_count: Type.Integer(),
  updated_at: Type.String(),
});

export const TransmissionView = Type.Object({
  id: Type.String(),
  source: Type.String(),
  created_at: Type.String(),
  start_time: Type.Union([Type.String(), Type.Null()]),
  mail_type: Type.String(),
  tags: Type.Array(Type.String()),
  metadata: Type.Record(Type.String(), Type.String()),
  content: Type.Object({
    subject: Type.Union([Type.String(), Type.Null()]),
    from: Type.Union([Type.String(), Type.Null()]),
    reply_to: Type.Union([Type.String(), Type.Null()]),
    has_text: Type.Boolean(),
    has_html: Type.Boolean(),
    attachments: Type.Array(
      Type.Object({
        filename: Type.String(),
        content_type: Type.String(),
        size: Type.Integer(),
        content_id: Type.Optional(Type.String()),
      }),
    ),
  }),
  options: Type.Record(Type.String(), Type.Unknown()),
  total_accepted_recipients: Type.Integer(),
  total_rejected_recipients: Type.Integer(),
  messages: Type.Array(MessageSummary),
});

export const DeliveryAttempt = Type.Object({
  attempt: Type.Integer(),
  started_at: Type.String(),
  finished_at: Type.String(),
  mx_host: Type.Union([Type.String(), Type.Null()]),
  address: Type.Union([Type.String(), Type.Null()]),
  tls: Type.Boolean(),
  /** With TLS: whether the certificate verified (trusted chain and host name); null without TLS. */
  tls_verified: Type.Union([Type.Boolean(), Type.Null()]),
  /** The recipient domain's MTA-STS policy mode (RFC 8461) at the attempt; null = no policy. */
  mta_sts: Type.Union([Type.Literal('enforce'), Type.Literal('testing'), Type.Literal('none'), Type.Null()]),
  outcome: Type.String(),
  smtp_code: Type.Union([Type.Integer(), Type.Null()]),
  enhanced_code: Type.Union([Type.String(), Type.Null()]),
  response: Type.Union([Type.String(), Type.Null()]),
  transcript: Type.Union([Type.String(), Type.Null()]),
});

export const MessageView = Type.Object({
  id: Type.String(),
  transmission_id: Type.String(),
  recipient: Type.String(),
  recipient_name: Type.Union([Type.String(), Type.Null()]),
  /** How the recipient was addressed; `to` for every message that is not part of a group message. */
  role: Role,
  state: Type.String(),
  attempt_count: Type.Integer(),
  next_attempt_at: Type.Union([Type.String(), Type.Null()]),
  last_response: Type.Union([Type.String(), Type.Null()]),
  metadata: Type.Record(Type.String(), Type.String()),
  created_at: Type.String(),
  updated_at: Type.String(),
  attempts: Type.Array(DeliveryAttempt),
});
