/** The public tracking routes and the tracking defaults (docs/tracking.md), both backends. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;

/** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
const publicHost = () => new URL(ctx.c.config.publicUrl).host;
let t: TestTenant;
let key: Buffer;
const GMAIL_UA = 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)';
const PERSON_UA =
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15';

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  key = deriveTokenKey(ctx.c.masterKey);
});
afterAll(async () => ctx?.close());

async function accept(email: string, mailType: 'transactional' | 'marketing', options: Record<string, unknown> = {}) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email }],
      content: { subject: 'Hi', html: '<a href="https://shop.example/">x</a>' },
      options: { mail_type: mailType, ...options },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  const txId = res.json().transmission_id as string;
  const msg = await ctx.c.database.db
    .selectFrom('messages')
    .select(['id'])
    .where('transmission_id', '=', txId)
    .executeTakeFirstOrThrow();
  const tx = await ctx.c.database.db
    .selectFrom('transmissions')
    .select(['options'])
    .where('id', '=', txId)
    .executeTakeFirstOrThrow();
  return { messageId: msg.id, options: JSON.parse(tx.options) as Record<string, unknown> };
}

async function events(messageId: string, type: string) {
  const rows = await ctx.c.database.db
    .selectFrom('events')
    .select(['data'])
    .where('message_id', '=', messageId)
    .where('type', '=', type)
    .orderBy('id')
    .execute();
  return rows.map((r) => JSON.parse(r.data) as Record<string, unknown>);
}

function get(url: string, ua = PERSON_UA, ip = '198.51.100.7') {
  return ctx.app.inject({ method: 'GET', url, headers: { host: publicHost(), 'user-agent': ua }, remoteAddress: ip });
}

describe('tracking settings and defaults', () => {
  it('defaults: off for transactional, on for marketing; a transmission option wins; PATCH changes the tenant default', async () => {
    const res = await call(ctx.app, 'GET', '/v1/tracking-settings', { key: t.apiKey });
    expect(res.json()).toEqual({
      open_tracking: { transactional: false, marketing: true },
      click_tracking: { transactional: false, marketing: true },
    });
    expect((await accept('a@track.example', 'transactional')).options).toMatchObject({
      open_tracking: false,
      click_tracking: false,
    });
    expect((await accept('a@track.example', 'marketing')).options).toMatchObject({
      open_tracking: true,
      click_tracking: true,
    });
    expect((await accept('a@track.example', 'marketing', { click_tracking: false })).options).toMatchObject({
      open_tracking: true,
      click_tracking: false,
    });
    const other = await createTenant(ctx);
    const patched = await call(ctx.app, 'PATCH', '/v1/tracking-settings', {
      key: other.apiKey,
      body: { click_tracking: { transactional: true } },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().click_tracking).toEqual({ transactional: true, marketing: true });
    const bad = await call(ctx.app, 'PATCH', '/v1/tracking-settings', {
      key: other.apiKey,
      body: { click_tracking: { weekly: true } },
    });
    expect(bad.statusCode).toBe(422);
    // The first tenant's defaults are untouched.
    expect(
      (await call(ctx.app, 'GET', '/v1/tracking-settings', { key: t.apiKey })).json().click_tracking.transactional,
    ).toBe(false);
  });
});

describe('public tracking routes', () => {
  it('a click answers 302 to the signed URL and records message.clicked with first per link', async () => {
    const { messageId } = await accept('click@track.example', 'marketing');
    const url = 'https://shop.example/sale?x=1&y=2';
    const tok = signToken(key, { kind: 'click', messageId, link: 0, url });
    const first = await get(`/c/${tok}`);
    expect(first.statusCode).toBe(302);
    expect(first.headers.location).toBe(url);
    expect(first.headers['cache-control']).toContain('no-store');
    await get(`/c/${tok}`);
    await get(`/c/${signToken(key, { kind: 'click', messageId, link: 1, url: 'https://shop.example/other' })}`);
    const ev = await events(messageId, 'message.clicked');
    expect(ev.map((e) => [e.url, e.first, e.machine])).toEqual([
      [url, true, false],
      [url, false, false],
      ['https://shop.example/other', true, false],
    ]);
    expect(ev[0]).toMatchObject({ user_agent: PERSON_UA, ip: '198.51.100.7' });
  });

  it('an open answers a 1x1 GIF, not cached, and records message.opened with first; the Gmail proxy is a machine', async () => {
    const { messageId } = await accept('open@track.example', 'marketing');
    const tok = signToken(key, { kind: 'open', messageId });
    const res = await get(`/o/${tok}`, GMAIL_UA, '66.249.84.1');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('image/gif');
    expect(res.rawPayload.subarray(0, 6).toString()).toBe('GIF89a');
    expect(res.headers['cache-control']).toContain('no-store');
    await get(`/o/${tok}`);
    const ev = await events(messageId, 'message.opened');
    expect(ev.map((e) => [e.first, e.machine])).toEqual([
      [true, true],
      [false, false],
    ]);
  });

  it('a tampered token, a token of another kind, another key and a deleted message all get the same 404 and record nothing', async () => {
    const { messageId } = await accept('tamper@track.example', 'marketing');
    const tok = signToken(key, { kind: 'click', messageId, link: 0, url: 'https://shop.example/' });
    const raw = Buffer.from(tok, 'base64url');
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 0x10;
    const foreign = signToken(deriveTokenKey(Buffer.alloc(32, 7)), {
      kind: 'click',
      messageId,
      link: 0,
      url: 'https://shop.example/',
    });
    const gone = signToken(key, {
      kind: 'click',
      messageId: '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
      link: 0,
      url: 'https://shop.example/',
    });
    const answers = await Promise.all(
      [
        `/c/${raw.toString('base64url')}`,
        `/c/${signToken(key, { kind: 'open', messageId })}`,
        `/c/${foreign}`,
        `/c/${gone}`,
        `/o/${signToken(key, { kind: 'unsubscribe', messageId })}`,
        `/u/${signToken(key, { kind: 'open', messageId })}`,
        '/c/x',
      ].map((u) => get(u)),
    );
    for (const a of answers) {
      expect(a.statusCode).toBe(404);
      expect(a.body).toBe('Not Found');
      expect(a.headers.location).toBeUndefined();
    }
    expect(await events(messageId, 'message.clicked')).toEqual([]);
  });

  it('no open redirect: the URL comes only from the signed token, never from the request', async () => {
    const { messageId } = await accept('redirect@track.example', 'marketing');
    const tok = signToken(key, { kind: 'click', messageId, link: 0, url: 'https://shop.example/' });
    const withQuery = await get(`/c/${tok}?url=https://evil.example/&redirect=https://evil.example/`);
    expect(withQuery.headers.location).toBe('https://shop.example/');
    // Swapping the URL inside a token breaks its signature.
    const raw = Buffer.from(tok, 'base64url');
    const forged = Buffer.concat([
      raw.subarray(0, 20),
      Buffer.from('https://evil.example/'),
      raw.subarray(raw.length - 16),
    ]);
    const res = await get(`/c/${forged.toString('base64url')}`);
    expect(res.statusCode).toBe(404);
    expect(res.headers.location).toBeUndefined();
  });

  it('GET /u shows a page with a confirm button and changes nothing; the one-click POST as Gmail sends it answers 200 and suppresses marketing only', async () => {
    const email = 'reader@track.example';
    const { messageId } = await accept(email, 'marketing');
    const tok = signToken(key, { kind: 'unsubscribe', messageId });
    const page = await get(`/u/${tok}`);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toMatch(/<form method="post">[\s\S]*<button type="submit">Unsubscribe<\/button>/);
    expect(await events(messageId, 'message.unsubscribed')).toEqual([]);
    expect((await call(ctx.app, 'GET', `/v1/suppressions?identifier=${email}`, { key: t.apiKey })).json().data).toEqual(
      [],
    );

    // What Gmail sends (RFC 8058): a POST with exactly this form body, no cookies, no referrer.
    const post = await ctx.app.inject({
      method: 'POST',
      url: `/u/${tok}`,
      headers: {
        host: publicHost(),
        'content-type': 'application/x-www-form-urlencoded',
        'user-agent': 'Mozilla/5.0 (compatible; Google-One-Click-Unsubscribe)',
      },
      payload: 'List-Unsubscribe=One-Click',
      remoteAddress: '209.85.220.41',
    });
    expect(post.statusCode).toBe(200);
    expect(post.body).toBe('');
    const s = (await call(ctx.app, 'GET', `/v1/suppressions?identifier=${email}`, { key: t.apiKey })).json().data;
    expect(s).toMatchObject([
      { identifier: email, reason_category: 'unsubscribe', source: 'unsubscribe', scope: 'marketing' },
    ]);
    expect(await events(messageId, 'message.unsubscribed')).toMatchObject([
      { method: 'one_click', suppression_id: s[0].id },
    ]);
    // A second POST (providers retry) is fine and emits nothing more.
    const again = await ctx.app.inject({
      method: 'POST',
      url: `/u/${tok}`,
      headers: { host: publicHost(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'List-Unsubscribe=One-Click',
    });
    expect(again.statusCode).toBe(200);
    expect(await events(messageId, 'message.unsubscribed')).toHaveLength(1);

    expect(
      (
        await call(ctx.app, 'POST', '/v1/transmissions', {
          key: t.apiKey,
          body: {
            recipients: [{ email }],
            content: { subject: 'Sale', text: 'x' },
            options: { mail_type: 'marketing' },
          },
        })
      ).json().items[0],
    ).toMatchObject({ status: 'suppressed', reason: 'unsubscribe' });
    expect(
      (
        await call(ctx.app, 'POST', '/v1/transmissions', {
          key: t.apiKey,
          body: { recipients: [{ email }], content: { subject: 'Reset', text: 'x' } },
        })
      ).json().total_accepted_recipients,
    ).toBe(1);
  });

  it("the page's button (a form POST) unsubscribes with method page", async () => {
    const { messageId } = await accept('pager@track.example', 'marketing');
    const tok = signToken(key, { kind: 'unsubscribe', messageId });
    const res = await ctx.app.inject({
      method: 'POST',
      url: `/u/${tok}`,
      headers: { host: publicHost(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'confirm=1',
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('You are unsubscribed');
    expect(await events(messageId, 'message.unsubscribed')).toMatchObject([{ method: 'page' }]);
  });
});
