/**
 * Issue 31, item 9: a tracked link whose URL holds CR/LF or characters outside Latin-1 made
 * `GET /c/<token>` answer 500 (Node refuses such a Location header). The redirect target is
 * encoded as a browser would read the href, and a click always redirects. Links are taken from
 * accepted html into the transmission's link table, as in real mail (version 2 click tokens).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redirectTarget } from '../../src/modules/tracking/redirect-target.ts';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;

/** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
const publicHost = () => new URL(ctx.c.config.publicUrl).host;
let t: TestTenant;
let key: Buffer;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  key = deriveTokenKey(ctx.c.masterKey);
});
afterAll(async () => ctx?.close());

/** href as written in the html -> the Location a click must answer with. */
const LINKS: [string, string][] = [
  ['https://shop.example/a&#13;&#10;Set-Cookie:&#32;stolen=1', 'https://shop.example/aSet-Cookie:%20stolen=1'],
  ['https://shop.example/caf&#233;?q=&#252;', 'https://shop.example/caf%C3%A9?q=%C3%BC'],
  ['https://bücher.example/日本?q=€#teil 2', 'https://xn--bcher-kva.example/%E6%97%A5%E6%9C%AC?q=%E2%82%AC#teil%202'],
  ['https://exa mple.example/&#8232;ü&#10;x', 'https://exa%20mple.example/%E2%80%A8%C3%BC%0Ax'],
  ['https://shop.example/sale?x=1&amp;y=2', 'https://shop.example/sale?x=1&y=2'],
];

describe('click redirects to links with unsafe characters', () => {
  it('answers 302 with the link encoded (never 500) and records the click with the URL as written', async () => {
    const html = LINKS.map(([href], i) => `<a href="${href}">link ${i}</a>`).join('<br>');
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: [{ email: 'clicker@track.example' }],
        content: { subject: 'Links', html },
        options: { mail_type: 'marketing', click_tracking: true },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const txId = (res.json() as { transmission_id: string }).transmission_id;
    const db = ctx.c.database.db;
    const msg = await db
      .selectFrom('messages')
      .select('id')
      .where('transmission_id', '=', txId)
      .executeTakeFirstOrThrow();
    const links = await db
      .selectFrom('tracking_links')
      .select(['idx', 'url'])
      .where('transmission_id', '=', txId)
      .orderBy('idx')
      .execute();
    expect(links).toHaveLength(LINKS.length);

    for (const { idx, url } of links) {
      const tok = signToken(key, { kind: 'click', messageId: msg.id, link: idx, ref: idx });
      const click = await ctx.app.inject({
        method: 'GET',
        url: `/c/${tok}`,
        headers: { host: publicHost() },
        remoteAddress: '198.51.100.7',
      });
      expect(click.statusCode, `${JSON.stringify(url)}: ${click.body}`).toBe(302);
      expect(click.headers.location).toBe(LINKS[idx]?.[1]);
    }
    const clicked = await db
      .selectFrom('events')
      .select('data')
      .where('message_id', '=', msg.id)
      .where('type', '=', 'message.clicked')
      .orderBy('id')
      .execute();
    expect(clicked.map((e) => (JSON.parse(e.data) as { url: string }).url)).toEqual(links.map((l) => l.url));
  });

  it('redirectTarget leaves printable ASCII alone and always returns a valid header value', () => {
    expect(redirectTarget('https://Shop.example/x?y=%41&z')).toBe('https://Shop.example/x?y=%41&z');
    // A lone surrogate (possible in a JSON string) becomes U+FFFD, as UTF-8 encoders do.
    expect(redirectTarget('https://shop.example/\ud800z')).toBe('https://shop.example/%EF%BF%BDz');
    for (const url of ['http://[::1/\r\n', 'https://\u0000\u007f\u0085/x', 'https://shop.example/\t\u00a0 ']) {
      expect(redirectTarget(url)).toMatch(/^[\x21-\x7e]+$/);
    }
  });
});
