import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerpSigner } from '../../src/modules/outcomes/verp.ts';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call } from '../helpers/context.ts';
import * as corpus from './corpus.ts';
import {
  deliver,
  eventsOf,
  type Harness,
  inboundCount,
  type Sent,
  sendInbound,
  startHarness,
  stateOf,
  suppressionOf,
} from './harness.ts';

/**
 * The inbound listener end to end: messages are delivered for real (sink MX), then reports in
 * the styles of several MTAs and providers come back over SMTP (nodemailer) to the listener.
 */
let h: Harness;
let n = 0;
const rcpt = (name: string) => `${name}${++n}@dest.test`;

beforeAll(async () => {
  h = await startHarness();
  // Tenant A's registered domain: its return-path domain bounces.shop.test takes fbl@ reports.
  const res = await call(h.ctx.app, 'POST', '/v1/sending-domains', { key: h.a.apiKey, body: { domain: 'shop.test' } });
  expect(res.statusCode).toBe(201);
});
afterAll(() => h?.close());

const original = (s: Sent) => ({ envelopeFrom: s.envelopeFrom, recipient: s.recipient, messageId: s.messageId });

async function bounced(sample: (o: corpus.Original) => string, name: string) {
  const sent = await deliver(h, h.a, rcpt(name));
  const info = await sendInbound(h.inbound.port, [sent.envelopeFrom], sample(original(sent)));
  expect(info.response).toMatch(/^250 /);
  return { sent, events: await eventsOf(h, sent.messageId), state: await stateOf(h, sent.messageId) };
}

describe('DSNs (RFC 3464) and plain-text bounces', () => {
  it('Postfix DSN 5.1.1: message.bounced async, state bounced, the address suppressed', async () => {
    const before = await inboundCount(h, 'bounce');
    const { sent, events, state } = await bounced((o) => corpus.postfixDsn(o), 'pfx');
    expect(state).toBe('bounced');
    const ev = events.find((e) => e.type === 'message.bounced');
    expect(ev?.data).toMatchObject({
      async: true,
      bounce_type: 'hard',
      category: 'bad_mailbox',
      smtp_code: 550,
      enhanced_code: '5.1.1',
      remote_mta: 'mx2.dest.test',
    });
    expect(String(ev?.data.diagnostic)).toContain('User unknown');
    expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toMatchObject({
      reason_category: 'hard_bounce',
      source: 'bounce',
    });
    expect(await inboundCount(h, 'bounce')).toBe(before + 1);
  });

  it('Postfix delayed DSN: message.deferred async, the message stays delivered, nothing suppressed', async () => {
    const { sent, events, state } = await bounced((o) => corpus.postfixDsn(o, '4.4.1', 'delayed'), 'delay');
    expect(state).toBe('delivered');
    const ev = events.find((e) => e.type === 'message.deferred');
    expect(ev?.data).toMatchObject({ async: true, enhanced_code: '4.4.1', next_attempt_at: null });
    expect(events.some((e) => e.type === 'message.bounced')).toBe(false);
    expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toBeUndefined();
  });

  it('Exim DSN with Status 5.0.0 and 552 5.2.2 in the diagnostic: soft bounce mailbox_full, not suppressed', async () => {
    const { sent, events, state } = await bounced(corpus.eximDsn, 'exim');
    expect(state).toBe('bounced');
    expect(events.find((e) => e.type === 'message.bounced')?.data).toMatchObject({
      async: true,
      bounce_type: 'soft',
      category: 'mailbox_full',
      smtp_code: 552,
      enhanced_code: '5.2.2',
    });
    expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toBeUndefined();
  });

  it('Exchange NDR marked Auto-Submitted: auto-replied is still a report: bounced 5.1.10', async () => {
    const { events, state } = await bounced(corpus.exchangeDsn, 'exch');
    expect(state).toBe('bounced');
    expect(events.find((e) => e.type === 'message.bounced')?.data).toMatchObject({
      async: true,
      bounce_type: 'hard',
      enhanced_code: '5.1.10',
    });
  });

  for (const [name, sample, code, enhanced] of [
    ['Exim plain text', corpus.eximPlain, 550, '5.1.1'],
    ['Gmail plain text', corpus.gmailPlain, 550, '5.1.1'],
    ['qmail failure notice', corpus.qmailPlain, null, '5.1.1'],
    ['wording only (user unknown)', corpus.wordingOnly, null, null],
  ] as const) {
    it(`non-standard bounce, ${name}: the same rule table, hard bounce, suppressed`, async () => {
      const { sent, events, state } = await bounced(sample, 'plain');
      expect(state).toBe('bounced');
      expect(events.find((e) => e.type === 'message.bounced')?.data).toMatchObject({
        async: true,
        bounce_type: 'hard',
        category: 'bad_mailbox',
        smtp_code: code,
        enhanced_code: enhanced,
      });
      expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toMatchObject({ reason_category: 'hard_bounce' });
    });
  }

  it('a second DSN for the same message changes nothing (one message.bounced)', async () => {
    const { sent } = await bounced((o) => corpus.postfixDsn(o), 'twice');
    await sendInbound(h.inbound.port, [sent.envelopeFrom], corpus.postfixDsn(original(sent)));
    const evs = await eventsOf(h, sent.messageId);
    expect(evs.filter((e) => e.type === 'message.bounced')).toHaveLength(1);
  });
});

describe('ARF complaints (RFC 5965)', () => {
  it('Yahoo-style ARF to fbl@<bounce host>, matched by the signed token in the returned message', async () => {
    const sent = await deliver(h, h.a, rcpt('arf'));
    const raw = corpus.yahooArf(original(sent), 'fbl@bounce.postyard.test');
    await sendInbound(h.inbound.port, ['fbl@bounce.postyard.test'], raw, 'feedbackloop@yahoo.test');
    // Feedback loops resend: still one event.
    await sendInbound(h.inbound.port, ['fbl@bounce.postyard.test'], raw, 'feedbackloop@yahoo.test');
    const evs = (await eventsOf(h, sent.messageId)).filter((e) => e.type === 'message.complained');
    expect(evs).toHaveLength(1);
    expect(evs[0]?.data).toMatchObject({ feedback_type: 'abuse', user_agent: 'Yahoo!-Mail-Feedback/2.0' });
    expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toMatchObject({
      reason_category: 'complaint',
      source: 'complaint',
    });
    expect(await stateOf(h, sent.messageId)).toBe('delivered');
  });

  it("Microsoft JMRP-style ARF to fbl@<tenant's return-path domain>, matched by our Message-ID", async () => {
    const sent = await deliver(h, h.a, rcpt('jmrp'));
    await sendInbound(
      h.inbound.port,
      ['fbl@bounces.shop.test'],
      corpus.microsoftArf(original(sent), 'fbl@bounces.shop.test'),
    );
    const ev = (await eventsOf(h, sent.messageId)).find((e) => e.type === 'message.complained');
    expect(ev?.data).toMatchObject({ feedback_type: 'abuse', user_agent: 'Microsoft JMRP/1.0' });
    expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toMatchObject({ reason_category: 'complaint' });
  });
});

describe('auto-replies and unmatched mail', () => {
  it('out-of-office, vacation, Precedence, subject-only and challenge-response replies are ignored and counted', async () => {
    const sent = await deliver(h, h.a, rcpt('ooo'));
    const before = await inboundCount(h, 'auto_reply');
    for (const sample of Object.values(corpus.AUTO_REPLIES)) {
      const info = await sendInbound(h.inbound.port, [sent.envelopeFrom], sample(original(sent)), sent.recipient);
      expect(info.response).toMatch(/^250 .*auto_reply/);
    }
    expect(await inboundCount(h, 'auto_reply')).toBe(before + Object.keys(corpus.AUTO_REPLIES).length);
    expect((await eventsOf(h, sent.messageId)).map((e) => e.type)).toEqual(['message.accepted', 'message.delivered']);
    expect(await stateOf(h, sent.messageId)).toBe('delivered');
  });

  it('a bounce for a validly signed token of no message of ours is counted unmatched, never an error', async () => {
    const before = await inboundCount(h, 'unmatched');
    const token = new VerpSigner(h.ctx.c.masterKey).sign(randomUUID());
    const to = `bounces+${token}@shop.test`;
    const info = await sendInbound(
      h.inbound.port,
      [to],
      corpus.postfixDsn({ envelopeFrom: to, recipient: 'x@dest.test', messageId: randomUUID() }),
    );
    expect(info.response).toMatch(/^250 .*unmatched/);
    expect(await inboundCount(h, 'unmatched')).toBe(before + 1);
  });
});

describe('refusals and bad input', () => {
  async function refused(to: string) {
    return sendInbound(h.inbound.port, [to], 'Subject: x\r\n\r\nx\r\n').then(
      () => null,
      (err: { responseCode?: number; response?: string }) => err,
    );
  }

  it('never an open relay: other recipients, unknown fbl@ domains and forged tokens get 550 5.7.1', async () => {
    const sent = await deliver(h, h.a, rcpt('forge'));
    const token = /^bounces\+([^@]+)@/.exec(sent.envelopeFrom)?.[1] ?? '';
    const forged = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
    const before = await inboundCount(h, 'refused');
    for (const to of [
      'someone@gmail.test',
      'postmaster@shop.test',
      'fbl@unknown.test',
      `bounces+${forged}@bounces.shop.test`,
      `bounces+${sent.messageId}@bounces.shop.test`, // the old, unsigned form
      'bounces+@shop.test',
    ]) {
      const err = await refused(to);
      expect(err?.responseCode, to).toBe(550);
      expect(err?.response, to).toMatch(/5\.7\.1/);
    }
    expect(await inboundCount(h, 'refused')).toBe(before + 6);
    expect(await stateOf(h, sent.messageId)).toBe('delivered');
  });

  it("a report for another tenant's message does not affect it (DSN via A's token, ARF via A's fbl@)", async () => {
    const mine = await deliver(h, h.a, rcpt('mine'));
    const theirs = await deliver(h, h.b, rcpt('theirs'));
    // A DSN to A's VERP address that quotes B's message: only the token counts.
    const dsn = corpus.postfixDsn({ ...original(theirs), envelopeFrom: mine.envelopeFrom });
    await sendInbound(h.inbound.port, [mine.envelopeFrom], dsn);
    // An ARF to A's fbl@ address quoting B's Message-ID (no token): B's message is not A's to touch.
    await sendInbound(
      h.inbound.port,
      ['fbl@bounces.shop.test'],
      corpus.microsoftArf(original(theirs), 'fbl@bounces.shop.test'),
    );
    expect(await stateOf(h, theirs.messageId)).toBe('delivered');
    expect((await eventsOf(h, theirs.messageId)).map((e) => e.type)).toEqual(['message.accepted', 'message.delivered']);
    expect(await suppressionOf(h, h.b.tenantId, theirs.recipient)).toBeUndefined();
    // A's own message: the DSN names B's recipient, but it is A's only recipient entry.
    expect(await stateOf(h, mine.messageId)).toBe('bounced');
  });

  it('malformed multipart (no closing boundary, garbage status part) is answered 250 and changes nothing', async () => {
    const sent = await deliver(h, h.a, rcpt('broken'));
    const raw = [
      `To: ${sent.envelopeFrom}`,
      'Subject: Undelivered Mail Returned to Sender',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="x"',
      '',
      '--x',
      'Content-Type: message/delivery-status',
      '',
      '\u0001\u0002garbage: ::::\r\n\tfolded\r\n:',
      '--x',
      'Content-Type: message/rfc822',
      'Content-Transfer-Encoding: base64',
      '',
      '!!!! not base64 ~~~~',
    ].join('\r\n');
    const info = await sendInbound(h.inbound.port, [sent.envelopeFrom], raw);
    expect(info.response).toMatch(/^250 /);
    // Still serving.
    const again = await sendInbound(h.inbound.port, [sent.envelopeFrom], corpus.postfixDsn(original(sent)));
    expect(again.response).toMatch(/^250 .*bounce/);
  });

  it('a report over 10 MB is refused 552 5.3.4; a large one under it (5,000 recipient groups) is handled', async () => {
    const sent = await deliver(h, h.a, rcpt('huge'));
    const big = `Subject: x\r\n\r\n${'x'.repeat(998)}\r\n`.repeat(10_600);
    const err = await sendInbound(h.inbound.port, [sent.envelopeFrom], big).then(
      () => null,
      (e: { responseCode?: number; response?: string }) => e,
    );
    expect(err?.responseCode).toBe(552);
    expect(err?.response).toMatch(/5\.3\.4/);
    const groups = Array.from(
      { length: 5000 },
      (_, i) => `Final-Recipient: rfc822; other${i}@dest.test\r\nAction: failed\r\nStatus: 5.1.1\r\n`,
    ).join('\r\n');
    const dsn = corpus
      .postfixDsn(original(sent))
      .replace('Final-Recipient: rfc822;', `${groups}\r\nFinal-Recipient: rfc822;`);
    const info = await sendInbound(h.inbound.port, [sent.envelopeFrom], dsn);
    expect(info.response).toMatch(/^250 /);
  });
});

describe('mailto unsubscribe (List-Unsubscribe)', () => {
  it('mail to unsubscribe+<token>@<return-path domain> suppresses for marketing and emits message.unsubscribed (mailto)', async () => {
    const sent = await deliver(h, h.a, rcpt('unsub'));
    const token = signToken(deriveTokenKey(h.ctx.c.masterKey), { kind: 'unsubscribe', messageId: sent.messageId });
    const to = `unsubscribe+${token}@bounces.shop.test`;
    const info = await sendInbound(
      h.inbound.port,
      [to],
      `From: ${sent.recipient}\r\nSubject: unsubscribe\r\n\r\n`,
      sent.recipient,
    );
    expect(info.response).toMatch(/^250 .*unsubscribe/);
    const ev = (await eventsOf(h, sent.messageId)).find((e) => e.type === 'message.unsubscribed');
    expect(ev?.data).toMatchObject({ method: 'mailto' });
    expect(await suppressionOf(h, h.a.tenantId, sent.recipient)).toMatchObject({
      reason_category: 'unsubscribe',
      scope: 'marketing',
    });
    // A forged token is refused like any other address.
    const forged = `unsubscribe+${token.slice(0, -2)}AA@bounces.shop.test`;
    const err = await sendInbound(h.inbound.port, [forged], 'Subject: x\r\n\r\n').then(
      () => null,
      (e: { responseCode?: number }) => e,
    );
    expect(err?.responseCode).toBe(550);
  });
});
