/**
 * The OpenAPI 3.1 `webhooks` of the document: one entry per event type, the POST Postyard makes
 * to a webhook URL (docs/webhooks.md): the Standard Webhooks headers, the event (or a batch of
 * events), an example of each type's `data`, and what the receiver's answer means.
 */
import { EVENT_TYPES, type EventType } from '../events/events.types.ts';

const TENANT = '0193a5b2-1111-7d4a-9f3b-2c8e4d6a1b90';
const TRANSMISSION = '0193a5b2-2222-7d4a-9f3b-2c8e4d6a1b90';
const MESSAGE = '0193a5b2-3333-7d4a-9f3b-2c8e4d6a1b90';

const DATA: Record<EventType, { what: string; data: Record<string, unknown> }> = {
  'message.accepted': { what: 'The recipient was queued.', data: {} },
  'message.suppressed': {
    what: 'Not queued: the address is suppressed.',
    data: { reason_category: 'hard_bounce', suppression_id: '0193a5b2-4444-7d4a-9f3b-2c8e4d6a1b90' },
  },
  'message.delivered': {
    what: 'The receiving server answered 250.',
    data: { mx_host: 'mx1.example.com', smtp_response: '250 2.0.0 Ok: queued as 4Xk2', tls: true, attempt: 1 },
  },
  'message.deferred': {
    what: 'A temporary failure; the message will be retried.',
    data: {
      smtp_code: 451,
      enhanced_code: '4.7.1',
      diagnostic: '451 4.7.1 Try again later',
      next_attempt_at: '2026-11-26T10:05:00.000Z',
    },
  },
  'message.bounced': {
    what: 'A permanent failure (or a DSN after delivery, then `async: true`).',
    data: {
      bounce_type: 'hard',
      category: 'bad_mailbox',
      smtp_code: 550,
      enhanced_code: '5.1.1',
      diagnostic: '550 5.1.1 No such user',
    },
  },
  'message.failed': {
    what: 'Retries exhausted, or the message could not be built.',
    data: { reason: 'retries exhausted after 72 h: 451 4.7.1 Try again later' },
  },
  'message.complained': {
    what: 'A spam complaint (ARF report).',
    data: { feedback_type: 'abuse', user_agent: 'ExampleFBL/1.0', async: true },
  },
  'message.opened': {
    what: 'The tracking pixel was loaded.',
    data: { user_agent: 'Mozilla/5.0', ip: '198.51.100.7', first: true, machine: false },
  },
  'message.clicked': {
    what: 'A tracked link was followed.',
    data: {
      user_agent: 'Mozilla/5.0',
      ip: '198.51.100.7',
      url: 'https://shop.example.com/sale',
      first: true,
      machine: false,
    },
  },
  'message.unsubscribed': {
    what: 'List-Unsubscribe one-click, the hosted page or the mailto address.',
    data: {
      method: 'one_click',
      suppression_id: '0193a5b2-4444-7d4a-9f3b-2c8e4d6a1b90',
      user_agent: 'Mozilla/5.0',
      ip: '198.51.100.7',
    },
  },
  'webhook.test': { what: 'Sent by POST /v1/webhooks/{id}/test.', data: {} },
};

const str = { type: 'string' };
const nstr = { type: ['string', 'null'] };
const nint = { type: ['integer', 'null'] };
const bool = { type: 'boolean' };
const ASYNC = { type: 'boolean', description: 'Reported after delivery, by a DSN or report (docs/inbound.md).' };
const CLIENT = {
  user_agent: str,
  ip: str,
  first: { type: 'boolean', description: 'The first such event of this message (and link).' },
  machine: { type: 'boolean', description: 'Likely a scanner or a privacy proxy, not a person (docs/tracking.md).' },
};

/** The fields of `data` per event type (docs/webhooks.md "Event payloads"); more may be added later. */
const DATA_FIELDS: Record<EventType, Record<string, unknown>> = {
  'message.accepted': {},
  'message.suppressed': { reason_category: str, suppression_id: str },
  'message.delivered': {
    mx_host: nstr,
    smtp_response: nstr,
    tls: bool,
    attempt: { type: 'integer' },
    sandbox: { type: 'boolean', description: 'Present and true for sandbox sends (nothing left the server).' },
  },
  'message.deferred': {
    smtp_code: nint,
    enhanced_code: nstr,
    diagnostic: str,
    next_attempt_at: { ...nstr, format: 'date-time' },
    async: ASYNC,
    remote_mta: nstr,
  },
  'message.bounced': {
    bounce_type: { type: 'string', enum: ['hard', 'soft', 'block'] },
    category: str,
    smtp_code: nint,
    enhanced_code: nstr,
    diagnostic: str,
    async: ASYNC,
    rule: nstr,
    remote_mta: nstr,
  },
  'message.failed': { reason: str },
  'message.complained': { feedback_type: str, user_agent: nstr, async: ASYNC },
  'message.opened': CLIENT,
  'message.clicked': { ...CLIENT, url: str },
  'message.unsubscribed': {
    method: { type: 'string', enum: ['one_click', 'page', 'mailto'] },
    suppression_id: str,
    user_agent: str,
    ip: str,
  },
  'webhook.test': {},
};

/** The event of one type: the Event schema with its `type` fixed and its `data` fields named. */
function eventOf(type: EventType, eventRef: string) {
  return {
    allOf: [
      { $ref: eventRef },
      {
        type: 'object',
        properties: {
          type: { const: type },
          data: { type: 'object', properties: DATA_FIELDS[type], additionalProperties: true },
        },
      },
    ],
  };
}

function eventExample(type: EventType) {
  const test = type === 'webhook.test';
  return {
    id: '0193a5b2-5555-7d4a-9f3b-2c8e4d6a1b90',
    type,
    created_at: '2026-11-26T10:00:00.000Z',
    tenant_id: TENANT,
    transmission_id: test ? null : TRANSMISSION,
    message_id: test ? null : MESSAGE,
    recipient: test ? null : 'ann@example.com',
    mail_type: test ? null : 'transactional',
    tags: test ? [] : ['welcome'],
    metadata: test ? {} : { order: '1234' },
    data: DATA[type].data,
  };
}

const header = (name: string, description: string, example: string) => ({
  in: 'header',
  name,
  required: true,
  description,
  schema: { type: 'string' },
  example,
});

export function webhooksDoc(eventRef: string): Record<string, unknown> {
  return Object.fromEntries(
    EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: `webhookEvents.${type.replace('.', '_')}`,
          tags: ['Webhook events'],
          summary: `${type}: ${DATA[type].what}`,
          description:
            `POSTed to the URL of every enabled webhook subscribed to \`${type}\` (or \`*\`). With ` +
            '`dispatch_policy: single` the body is one event; with `batch` it is `{"batch_id","events":[...]}`. ' +
            'Signed per Standard Webhooks: verify `webhook-signature` over `<webhook-id>.<webhook-timestamp>.<raw body>` ' +
            '(docs/webhook-verification.md).',
          security: [],
          parameters: [
            header(
              'webhook-id',
              'The event id (single) or the batch_id (batch); the same on every retry.',
              '0193a5b2-5555-7d4a-9f3b-2c8e4d6a1b90',
            ),
            header('webhook-timestamp', 'Unix seconds when the request was signed.', '1795687200'),
            header(
              'webhook-signature',
              '`v1,<base64 HMAC-SHA256>`; two space-separated entries while a rotated-out secret is still live.',
              'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
            ),
          ],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  oneOf: [
                    eventOf(type, eventRef),
                    {
                      type: 'object',
                      required: ['batch_id', 'events'],
                      properties: {
                        batch_id: { type: 'string' },
                        events: {
                          type: 'array',
                          description: 'A batch may mix event types: each is one of the webhooks of this document.',
                          items: { $ref: eventRef },
                        },
                      },
                    },
                  ],
                },
                examples: {
                  single: { summary: 'dispatch_policy single', value: eventExample(type) },
                  batch: {
                    summary: 'dispatch_policy batch',
                    value: { batch_id: '0193a5b2-6666-7d4a-9f3b-2c8e4d6a1b90', events: [eventExample(type)] },
                  },
                },
              },
            },
          },
          responses: {
            '2XX': { description: 'Received: the event is not sent again.' },
            '410': { description: 'Gone: the webhook is disabled and nothing more is sent to it.' },
            '4XX': {
              description:
                'Failed: retried on the schedule (a Retry-After is honoured), disabled after 5 days of failures.',
            },
            '5XX': { description: 'Failed: retried on the schedule, as for 4XX.' },
          },
        },
      },
    ]),
  );
}
