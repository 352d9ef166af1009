/**
 * The public tracking routes are rate limited per client address (docs/tracking.md "Rate
 * limits"): over the bucket, every route answers 429 with Retry-After and records nothing, before
 * the token is even looked at (a 429 tells nothing about tokens or messages); other addresses
 * are not affected. Both backends (the limiter's store follows the backend).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

const BURST = 5;
let ctx: TestContext;

/** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
const publicHost = () => new URL(ctx.c.config.publicUrl).host;
let t: TestTenant;
let key: Buffer;
const UA = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';

beforeAll(async () => {
  ctx = await createTestContext({
    env: { POSTYARD_TRACKING_RATE_LIMIT_RPS: '1', POSTYARD_TRACKING_RATE_LIMIT_BURST: String(BURST) },
  });
  t = await createTenant(ctx);
  key = deriveTokenKey(ctx.c.masterKey);
});
afterAll(async () => ctx?.close());

async function message(): Promise<string> {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email: 'limit@track.example' }],
      content: { subject: 'Hi', html: '<a href="https://shop.example/">x</a>' },
      options: { mail_type: 'marketing' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  const row = await ctx.c.database.db
    .selectFrom('messages')
    .select('id')
    .where('transmission_id', '=', res.json().transmission_id as string)
    .executeTakeFirstOrThrow();
  return row.id;
}

async function clickCount(messageId: string): Promise<number> {
  const r = await ctx.c.database.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('message_id', '=', messageId)
    .where('type', '=', 'message.clicked')
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

const req = (method: 'GET' | 'POST', url: string, ip: string) =>
  ctx.app.inject({
    method,
    url,
    remoteAddress: ip,
    headers: { host: publicHost(), 'user-agent': UA, 'content-type': 'application/x-www-form-urlencoded' },
    ...(method === 'POST' ? { payload: 'List-Unsubscribe=One-Click' } : {}),
  });

describe('tracking rate limit per client address', () => {
  it('over the burst: 429 with Retry-After on every route, nothing recorded, other addresses unaffected', async () => {
    const messageId = await message();
    const click = `/c/${signToken(key, { kind: 'click', messageId, link: 0, url: 'https://shop.example/' })}`;
    const ip = '203.0.113.50';
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 3 * BURST }, () => req('GET', click, ip)));
    const elapsedS = (Date.now() - started) / 1000;
    const ok = answers.filter((a) => a.statusCode === 302).length;
    const limited = answers.filter((a) => a.statusCode === 429);
    expect(ok + limited.length).toBe(3 * BURST);
    // The burst, plus at most what the bucket refilled (1/s) while the requests ran.
    expect(ok).toBeGreaterThanOrEqual(BURST);
    expect(ok).toBeLessThanOrEqual(BURST + Math.ceil(elapsedS) + 1);
    expect(limited.length).toBeGreaterThan(0);
    for (const a of limited) {
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(a.headers['cache-control']).toContain('no-store');
      expect(a.body).toBe('Too Many Requests');
    }
    // Only the redirected clicks were recorded.
    expect(await clickCount(messageId)).toBe(ok);

    // Every tracking route of this address is refused now, whatever the token: a 429 before the
    // token is read says nothing about it.
    const open = `/o/${signToken(key, { kind: 'open', messageId })}`;
    const unsub = `/u/${signToken(key, { kind: 'unsubscribe', messageId })}`;
    for (const [method, url] of [
      ['GET', open],
      ['GET', unsub],
      ['POST', unsub],
      ['GET', '/c/not-a-token-at-all-but-long-enough'],
    ] as const) {
      const r = await req(method, url, ip);
      expect(r.statusCode, `${method} ${url}`).toBe(429);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    const unsubscribed = await ctx.c.database.db
      .selectFrom('events')
      .select('id')
      .where('message_id', '=', messageId)
      .where('type', 'in', ['message.unsubscribed', 'message.opened'])
      .execute();
    expect(unsubscribed).toEqual([]);

    // Another address has its own bucket: its click is redirected and recorded.
    const before = await clickCount(messageId);
    const other = await req('GET', click, '198.51.100.77');
    expect(other.statusCode).toBe(302);
    expect(other.headers.location).toBe('https://shop.example/');
    expect(await clickCount(messageId)).toBe(before + 1);
    expect((await req('GET', '/c/not-a-token-at-all-but-long-enough', '2001:db8::77')).statusCode).toBe(404);

    // After Retry-After, the limited address is served again.
    const wait = Number(limited[0]?.headers['retry-after'] ?? 1);
    await new Promise((r) => setTimeout(r, wait * 1000 + 200));
    expect((await req('GET', click, ip)).statusCode).toBe(302);
  });
});
