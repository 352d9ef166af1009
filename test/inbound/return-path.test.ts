import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/context.ts';
import * as corpus from './corpus.ts';
import { deliver, eventsOf, type Harness, sendInbound, startHarness, stateOf } from './harness.ts';

/**
 * The return path of mail whose From domain is not a registered sending domain (contract section
 * 15): the envelope sender is `bounces+<token>@<POSTYARD_BOUNCE_HOST>`, whose MX is the inbound
 * listener, never `@<From domain>` (that domain's MX is someone else's, so its DSNs were lost).
 * The harness's bounce host is bounce.postyard.test; tenant B sends From other.test, registered
 * nowhere.
 */
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

describe('return path without a registered sending domain', () => {
  it('the envelope sender uses POSTYARD_BOUNCE_HOST, and a DSN sent there bounces the message', async () => {
    const list = await call(h.ctx.app, 'GET', '/v1/sending-domains', { key: h.b.apiKey });
    expect(list.statusCode).toBe(200);
    expect(JSON.stringify(list.json())).not.toContain('other.test');

    const sent = await deliver(h, h.b, 'gone@dest.test');
    expect(sent.envelopeFrom).toMatch(/^bounces\+[a-z2-7]{43}@bounce\.postyard\.test$/);

    const info = await sendInbound(
      h.inbound.port,
      [sent.envelopeFrom],
      corpus.postfixDsn({ ...sent, fromDomain: 'other.test' }),
    );
    expect(info.response).toMatch(/^250 .*bounce/);
    expect(await stateOf(h, sent.messageId)).toBe('bounced');
    const ev = (await eventsOf(h, sent.messageId)).find((e) => e.type === 'message.bounced');
    expect(ev).toMatchObject({ tenant: h.b.tenantId, data: { async: true, enhanced_code: '5.1.1' } });
  });

  it('an ARF to fbl@<bounce host> for such a message is a complaint of its tenant', async () => {
    const sent = await deliver(h, h.b, 'annoyed@dest.test');
    await sendInbound(
      h.inbound.port,
      ['fbl@bounce.postyard.test'],
      corpus.yahooArf({ ...sent, fromDomain: 'other.test' }, 'fbl@bounce.postyard.test'),
      'feedbackloop@yahoo.test',
    );
    const ev = (await eventsOf(h, sent.messageId)).find((e) => e.type === 'message.complained');
    expect(ev).toMatchObject({ tenant: h.b.tenantId, data: { feedback_type: 'abuse' } });
  });
});

describe('return path while no bounce host is configured (development)', () => {
  let dev: Harness;
  beforeAll(async () => {
    // POSTYARD_BOUNCE_HOST unset and an address-literal EHLO name: the `localhost` placeholder.
    dev = await startHarness({ POSTYARD_BOUNCE_HOST: '', POSTYARD_EHLO_NAME: '[127.0.0.1]' });
  });
  afterAll(() => dev?.close());

  it('the envelope sender keeps the From domain, not bounces+...@localhost', async () => {
    expect(dev.ctx.c.config.bounceHost).toBe('localhost');
    const sent = await deliver(dev, dev.b, 'dev@dest.test');
    expect(sent.envelopeFrom).toMatch(/^bounces\+[a-z2-7]{43}@other\.test$/);
    // Should a bounce reach the listener there anyway, it still counts.
    const info = await sendInbound(
      dev.inbound.port,
      [sent.envelopeFrom],
      corpus.postfixDsn({ ...sent, fromDomain: 'other.test' }),
    );
    expect(info.response).toMatch(/^250 .*bounce/);
    expect(await stateOf(dev, sent.messageId)).toBe('bounced');
  });
});
