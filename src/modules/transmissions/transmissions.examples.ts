/** Examples of the transmissions operations for the OpenAPI document (route config `openapi`). */
import type { RouteDocs } from '../../http/openapi/index.ts';

const TX = '0193a5b2-2222-7d4a-9f3b-2c8e4d6a1b90';
const MSG = '0193a5b2-3333-7d4a-9f3b-2c8e4d6a1b90';

export const SEND_DOCS: RouteDocs = {
  errors: ['sender_domain_not_verified'],
  request: {
    recipients: [
      { email: 'ann@example.com', name: 'Ann', substitution_data: { first_name: 'Ann' } },
      { email: 'bob@example.com', substitution_data: { first_name: 'Bob' } },
      // A bcc recipient makes a group message: every copy shows To: Ann, bob@example.com.
      { email: 'orders@example.com', role: 'bcc' },
    ],
    content: {
      from: 'Shop <news@mail.example.com>',
      subject: 'Your order, {{first_name}}',
      text: 'Hello {{first_name}}, your order has shipped.',
      html: '<img src="cid:logo" alt="Shop"><p>Hello {{first_name}}, your order has shipped.</p>',
      attachments: [
        {
          filename: 'logo.png',
          content_type: 'image/png',
          content_id: 'logo',
          data: 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
        },
      ],
    },
    options: { mail_type: 'transactional', metadata: { order: '1234' } },
  },
  responses: {
    202: {
      transmission_id: TX,
      items: [{ email: 'bob@example.com', status: 'suppressed', reason: 'hard_bounce' }],
      total_accepted_recipients: 2,
      total_rejected_recipients: 1,
    },
  },
};

export const GET_DOCS: RouteDocs = {
  responses: {
    200: {
      id: TX,
      source: 'api',
      created_at: '2026-11-26T10:00:00.000Z',
      start_time: null,
      mail_type: 'transactional',
      tags: ['orders'],
      metadata: { order: '1234' },
      content: {
        subject: 'Your order, {{first_name}}',
        from: 'Shop <news@mail.example.com>',
        reply_to: null,
        has_text: true,
        has_html: true,
        attachments: [],
      },
      options: { mail_type: 'transactional' },
      total_accepted_recipients: 1,
      total_rejected_recipients: 1,
      messages: [
        {
          id: MSG,
          recipient: 'ann@example.com',
          role: 'to',
          state: 'delivered',
          attempt_count: 1,
          updated_at: '2026-11-26T10:00:02.000Z',
        },
      ],
    },
  },
};

export const MESSAGE_DOCS: RouteDocs = {
  responses: {
    200: {
      id: MSG,
      transmission_id: TX,
      recipient: 'ann@example.com',
      recipient_name: 'Ann',
      role: 'to',
      state: 'delivered',
      attempt_count: 1,
      next_attempt_at: null,
      last_response: '250 2.0.0 Ok: queued as 4Xk2',
      metadata: { order: '1234' },
      created_at: '2026-11-26T10:00:00.000Z',
      updated_at: '2026-11-26T10:00:02.000Z',
      attempts: [
        {
          attempt: 1,
          started_at: '2026-11-26T10:00:01.000Z',
          finished_at: '2026-11-26T10:00:02.000Z',
          mx_host: 'mx1.example.com',
          address: '192.0.2.25',
          tls: true,
          tls_verified: true,
          mta_sts: null,
          outcome: 'delivered',
          smtp_code: 250,
          enhanced_code: '2.0.0',
          response: '250 2.0.0 Ok: queued as 4Xk2',
          transcript: '220 mx1.example.com ESMTP\n> EHLO postyard.example.net\n250-mx1.example.com ...',
        },
      ],
    },
  },
};
