import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type DkimVerifier, startDkimVerifier } from '../../../../test/peers/dkim-verifier.ts';
import type { MessagesTable } from '../../../db/schema.ts';
import { fromDomainOf, type StoredContent } from '../../content/stored-content.ts';
import { generateDkimKeyPair } from './dkim.ts';
import { buildMessage } from './mime.ts';
import { clearSharedBodies, fromSharedBody, type SharedInput, sharedBodyStats } from './shared-body.ts';
import { renderMessage } from './renderer.ts';

/** MailComposer picks a random MIME boundary per composition; equal messages differ only there. */
const sameBoundary = (raw: string) => raw.replace(/--_NmP-[0-9a-f]+-Part_/g, '--_NmP-BOUNDARY-Part_');

const shared: SharedInput = {
  from: 'Shöp <shop@mail.example.com>',
  replyTo: 'help@mail.example.com',
  subject: 'Grüße – order 42',
  text: 'Thanks for your order.\nLine two\n.leading dot\n',
  html: '<p>Thanks for your <b>order</b></p>',
  headers: { 'X-Campaign': 'autumn' },
  attachments: [{ filename: 'a.bin', contentType: 'application/octet-stream', content: Buffer.from([0, 1, 2, 255]) }],
};

beforeEach(() => clearSharedBodies());

describe('shared bodies', () => {
  it('gives every eligible recipient exactly the message a full composition gives', async () => {
    const date = new Date('2026-11-05T07:08:09Z');
    const recipients = [
      { email: 'ann@example.net' },
      { email: 'bob@example.net', name: 'Bob Smith' },
      { email: 'x1234567890@sub.example.org', name: 'Carol 2' },
    ];
    for (const [i, to] of recipients.entries()) {
      const messageId = `m-${i}@mail.example.com`;
      const parts = await fromSharedBody('tx-1', to, messageId, () => shared, date);
      expect(parts, JSON.stringify(to)).not.toBeNull();
      const viaSharedBody = Buffer.concat([
        Buffer.from(`${parts?.head}\r\n\r\n`, 'latin1'),
        parts?.body ?? Buffer.alloc(0),
      ]);
      const full = await buildMessage({ ...shared, to, messageId, date });
      expect(sameBoundary(viaSharedBody.toString('latin1'))).toBe(sameBoundary(full.toString('latin1')));
    }
  });

  it('is not used where MailComposer would encode, quote or fold the To field', async () => {
    const cases = [
      { email: 'ann@example.net', name: 'Änn' },
      { email: 'ann@example.net', name: 'Smith, Ann' },
      { email: 'ann@example.net', name: 'Ann  Smith' },
      { email: 'ännchen@example.net' },
      { email: `${'a'.repeat(70)}@example.net` },
    ];
    for (const to of cases) expect(await fromSharedBody('tx-2', to, 'm@mail.example.com', () => shared)).toBeNull();
  });

  // Fair claims take a few messages of each of many tenants in turn: with 1,000
  // transmissions in rotation, a cache of the last 64 composed every one again on each turn.
  it('composes each of 1,000 transmissions sent in turn once, not once per turn', async () => {
    const composed = new Map<string, number>();
    for (let turn = 0; turn < 3; turn++) {
      for (let t = 0; t < 1000; t++) {
        const id = `tx-${t}`;
        const parts = await fromSharedBody(
          id,
          { email: `r${turn}@example.net` },
          `m-${t}-${turn}@mail.example.com`,
          () => {
            composed.set(id, (composed.get(id) ?? 0) + 1);
            return { ...shared, subject: `order ${t}` };
          },
        );
        expect(parts?.head).toContain(`Subject: order ${t}`);
      }
    }
    expect(composed.size).toBe(1000);
    expect([...composed.values()].every((n) => n === 1)).toBe(true);
  });

  it('keeps its bodies within the byte budget, dropping the least recently used', async () => {
    clearSharedBodies(1024 * 1024);
    const big = { ...shared, text: 'x'.repeat(200_000), html: undefined, attachments: [] };
    let composes = 0;
    const send = (id: string) =>
      fromSharedBody(id, { email: 'ann@example.net' }, `m-${id}@mail.example.com`, () => {
        composes++;
        return big;
      });
    for (let t = 0; t < 8; t++) {
      await send(`big-${t}`);
      // big-0 is used again after each new one: it is the most recently used, never dropped.
      await send('big-0');
    }
    const { entries, bytes } = sharedBodyStats();
    expect(bytes).toBeLessThanOrEqual(1024 * 1024);
    expect(entries).toBeGreaterThan(1);
    expect(entries).toBeLessThan(8);
    expect(composes).toBe(8);
    await send('big-1');
    expect(composes).toBe(9);
  });

  it('composes a body once for messages that ask for it while it is being composed', async () => {
    let composes = 0;
    const all = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fromSharedBody('tx-concurrent', { email: `r${i}@example.net` }, `m-${i}@mail.example.com`, () => {
          composes++;
          return shared;
        }),
      ),
    );
    expect(all.every((p) => p !== null)).toBe(true);
    expect(composes).toBe(1);
  });
});

describe('renderMessage with a shared body', () => {
  const keys = generateDkimKeyPair();
  let verifier: DkimVerifier;
  beforeAll(async () => {
    verifier = await startDkimVerifier('mail.example.com', 's1', keys.publicKeyBase64);
  });
  afterAll(() => verifier.close());

  const content: StoredContent = {
    subject: 'Your receipt',
    from: 'Shop <shop@mail.example.com>',
    reply_to: null,
    text: 'Thanks for your order.\n',
    html: '<p>Thanks</p>',
    headers: {},
    attachments: [],
    template_id: null,
  };
  const msg = (id: string, recipient: string): MessagesTable => ({
    tenant_id: 't1',
    id,
    transmission_id: 'tx-3',
    recipient,
    recipient_name: null,
    recipient_domain: 'example.net',
    substitution_data: null,
    metadata: null,
    state: 'sending',
    attempt_count: 0,
    next_attempt_at: '2026-11-25T00:00:00.000Z',
    locked_until: null,
    locked_by: null,
    last_response: null,
    created_at: '2026-11-25T00:00:00.000Z',
    updated_at: '2026-11-25T00:00:00.000Z',
  });
  const key = {
    domainName: 'mail.example.com',
    keySelector: 's1',
    privateKeyPem: keys.privateKeyPem,
    returnPathDomain: 'bounces.mail.example.com',
  };

  it("signs each recipient's message so that an independent verifier accepts it", async () => {
    const tx = { id: 'tx-3', content, raw: null, options: {}, fromDomain: fromDomainOf(content) };
    for (const [id, rcpt] of [
      ['0193a1b2-0000-7000-8000-000000000001', 'ann@example.net'],
      ['0193a1b2-0000-7000-8000-000000000002', 'bob@example.net'],
    ] as const) {
      const r = await renderMessage(msg(id, rcpt), tx, key, 'verp-token', 'bounce.example.net');
      const text = r.raw.toString('latin1');
      expect(text).toContain(`\r\nTo: ${rcpt}\r\n`);
      expect(text).toContain(`\r\nMessage-ID: <${id}@mail.example.com>\r\n`);
      expect(text).not.toMatch(/[^\r]\n/); // CRLF only
      expect(await verifier.verify(r.raw)).toBe('pass');
    }
  });

  // A body composed for a transmission's only message was kept where nothing
  // read it again (4,096 of them, ~14 MB of a render thread's heap, in the PostgreSQL soak).
  it('composes the message of a one-recipient transmission on its own and keeps no shared body for it', async () => {
    clearSharedBodies();
    const single = {
      id: 'tx-single',
      content,
      raw: null,
      options: {},
      fromDomain: fromDomainOf(content),
      single: true,
    };
    const id = '0193a1b2-0000-7000-8000-000000000003';
    const r = await renderMessage(
      { ...msg(id, 'cy@example.net'), transmission_id: 'tx-single' },
      single,
      key,
      'v',
      'b',
    );
    const text = r.raw.toString('latin1');
    expect(text).toContain('\r\nTo: cy@example.net\r\n');
    expect(text).toContain(`\r\nMessage-ID: <${id}@mail.example.com>\r\n`);
    expect(await verifier.verify(r.raw)).toBe('pass');
    expect(sharedBodyStats().entries).toBe(0);
  });
});
