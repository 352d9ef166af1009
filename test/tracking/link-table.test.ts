/**
 * Click tokens naming link table rows (versions 2 and 3) and the transmission link table
 * (docs/tracking.md "Tokens", migration 018), both backends: accept stores each distinct tracked
 * URL once per transmission, delivered mail carries 51-character version 3 tokens naming those
 * rows (URL-carrying version 1 tokens only for
 * links built from a recipient's data), clicks redirect to the stored URL only, and every token
 * that is not ours or names nothing gets the same 404. Mail sent with version 1 and 2 tokens still
 * works.
 */
import { createHmac } from 'node:crypto';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { linkUrl } from '../../src/modules/tracking/links.ts';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';

let ctx: TestContext;

/** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
const publicHost = () => new URL(ctx.c.config.publicUrl).host;
let t: TestTenant;
let other: TestTenant;
let dns: DnsServer;
let sink: SinkMx;
let worker: DeliveryWorker;
let key: Buffer;
const signing = testSigningKey('example.com');
const UA =
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15';

beforeAll(async () => {
  sink = await startSinkMx({ tls: false });
  dns = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dns.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
    },
  });
  t = await createTenant(ctx, 'Shop <news@example.com>');
  other = await createTenant(ctx, 'Other <news@example.com>');
  key = deriveTokenKey(ctx.c.masterKey);
  worker = startTestWorker(ctx.c, 'tracking-link-table', { signing });
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await sink?.close();
  await dns?.close();
});

async function accept(
  tenant: TestTenant,
  html: string,
  recipients: { email: string; substitution_data?: Record<string, unknown> }[],
  text?: string,
) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: tenant.apiKey,
    body: {
      recipients,
      content: { from: 'Shop <news@example.com>', subject: 'Sale', html, ...(text ? { text } : {}) },
      options: { mail_type: 'marketing' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  return res.json().transmission_id as string;
}

async function delivered(email: string) {
  const end = Date.now() + 60_000;
  for (;;) {
    const m = sink.messages.find((x) => x.rcptTo.includes(email));
    if (m) return { raw: m.raw, parsed: await simpleParser(m.raw) };
    if (Date.now() > end) throw new Error(`nothing delivered to ${email}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function messageOf(txId: string, email: string) {
  return (
    await ctx.c.database.db
      .selectFrom('messages')
      .select('id')
      .where('transmission_id', '=', txId)
      .where('recipient', '=', email)
      .executeTakeFirstOrThrow()
  ).id;
}

async function linkRows(txId: string) {
  return ctx.c.database.db
    .selectFrom('tracking_links')
    .select(['tenant_id', 'idx', 'url'])
    .where('transmission_id', '=', txId)
    .orderBy('idx')
    .execute();
}

/** The click tokens of an html part, in order. */
function clickTokens(html: string): string[] {
  return [...html.matchAll(/\/c\/([A-Za-z0-9_-]+)"/g)].map((m) => m[1] as string);
}

const version = (token: string) => Buffer.from(token, 'base64url')[0];

function click(token: string) {
  return ctx.app.inject({
    method: 'GET',
    url: `/c/${token}`,
    headers: { host: publicHost(), 'user-agent': UA },
    remoteAddress: '198.51.100.9',
  });
}

async function clickedCount(): Promise<number> {
  const r = await ctx.c.database.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('type', '=', 'message.clicked')
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/** `payload` with our MAC, as token.ts signs. */
function signed(payload: Buffer): string {
  const mac = createHmac('sha256', key).update(payload).digest().subarray(0, 16);
  return Buffer.concat([payload, mac]).toString('base64url');
}

/** A version 2 click token built byte by byte as mail sent before version 3 carries it. */
function version2Token(messageId: string, link: number, ref: number): string {
  return signed(
    Buffer.concat([
      Buffer.from([2, 1]),
      Buffer.from(messageId.replace(/-/g, ''), 'hex'),
      Buffer.from([link >> 8, link & 0xff, ref >> 8, ref & 0xff]),
    ]),
  );
}

/** A version 1 click token built byte by byte as mail sent before version 2 carries it. */
function oldFormatToken(messageId: string, link: number, url: string): string {
  return signed(
    Buffer.concat([
      Buffer.from([1, 1]),
      Buffer.from(messageId.replace(/-/g, ''), 'hex'),
      Buffer.from([link >> 8, link & 0xff]),
      Buffer.from(url, 'utf8'),
    ]),
  );
}

const HTML =
  '<html><body><p>Hi</p>' +
  '<a href="https://shop.example/a?x=1&amp;y=2">a</a> <a href="https://shop.example/b">b</a> ' +
  '<a href="mailto:help@example.com">mail</a> ' +
  '<a data-postyard-track="false" href="https://shop.example/plain">plain</a> ' +
  '<a href="https://shop.example/u/{{uid}}">you</a> ' +
  '<a href=" https://shop.example/a?x=1&y=2 ">a again</a> <area href="https://shop.example/c">' +
  '</body></html>';
const TEXT = 'Sale: https://shop.example/a?x=1&y=2';

describe('link table at accept', () => {
  it('stores each distinct tracked URL once, in order, under the tenant; not opted-out, mailto or templated ones', async () => {
    const txId = await accept(t, HTML, [{ email: 'rows@nowhere.test' }]);
    expect(await linkRows(txId)).toEqual([
      { tenant_id: t.tenantId, idx: 0, url: 'https://shop.example/a?x=1&y=2' },
      { tenant_id: t.tenantId, idx: 1, url: 'https://shop.example/b' },
      { tenant_id: t.tenantId, idx: 2, url: 'https://shop.example/c' },
    ]);
  });

  it('a transmission to 2,000 recipients writes its 20 links once', async () => {
    const html = Array.from({ length: 20 }, (_, i) => `<a href="https://shop.example/p/${i}">${i}</a>`).join(' ');
    const recipients = Array.from({ length: 2000 }, (_, i) => ({ email: `many${i}@nowhere.test` }));
    const txId = await accept(t, html, recipients);
    const rows = await linkRows(txId);
    expect(rows.map((r) => r.url)).toEqual(Array.from({ length: 20 }, (_, i) => `https://shop.example/p/${i}`));
    const all = await ctx.c.database.db
      .selectFrom('tracking_links')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('transmission_id', '=', txId)
      .executeTakeFirstOrThrow();
    expect(Number(all.n)).toBe(20);
  });

  it('nothing for a transmission whose clicks are not tracked', async () => {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: [{ email: 'untracked@nowhere.test' }],
        content: { from: 'Shop <news@example.com>', subject: 'x', html: HTML },
        options: { mail_type: 'transactional' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    expect(await linkRows(res.json().transmission_id)).toEqual([]);
  });

  it('link rows go with their transmission', async () => {
    const txId = await accept(t, HTML, [{ email: 'purged@nowhere.test' }]);
    expect((await linkRows(txId)).length).toBe(3);
    await ctx.c.database.db.deleteFrom('messages').where('transmission_id', '=', txId).execute();
    await ctx.c.database.db.deleteFrom('transmissions').where('id', '=', txId).execute();
    expect(await linkRows(txId)).toEqual([]);
  });
});

describe('delivered version 3 tokens', () => {
  it('shared body: links found in the table get 51-character tokens; clicks go to the stored URL, first per link position; text and opted-out links untouched', async () => {
    const txId = await accept(t, HTML, [{ email: 'shared@dest.test' }], TEXT);
    const { parsed } = await delivered('shared@dest.test');
    const html = parsed.html || '';
    expect(parsed.text).toContain('https://shop.example/a?x=1&y=2');
    expect(html).toContain('<a href="https://shop.example/plain">plain</a>');
    expect(html).toContain('<a href="mailto:help@example.com">');
    const tokens = clickTokens(html);
    // a, b, the templated link (no recipient data: rendered empty, not in the table), a again, c
    expect(tokens.length).toBe(5);
    expect(tokens.map(version)).toEqual([3, 3, 1, 3, 3]);
    for (const i of [0, 1, 3, 4]) expect(tokens[i]?.length).toBe(51);
    const expected = [
      'https://shop.example/a?x=1&y=2',
      'https://shop.example/b',
      'https://shop.example/u/',
      'https://shop.example/a?x=1&y=2',
      'https://shop.example/c',
    ];
    for (const [i, tok] of tokens.entries()) {
      const res = await click(tok);
      expect(res.statusCode, `link ${i}`).toBe(302);
      expect(res.headers.location).toBe(expected[i]);
    }
    await click(tokens[0] as string);
    const messageId = await messageOf(txId, 'shared@dest.test');
    const ev = await ctx.c.database.db
      .selectFrom('events')
      .select('data')
      .where('message_id', '=', messageId)
      .where('type', '=', 'message.clicked')
      .orderBy('id')
      .execute();
    expect(ev.map((e) => JSON.parse(e.data) as { url: string; first: boolean }).map((d) => [d.url, d.first])).toEqual([
      ...expected.map((u) => [u, true]),
      [expected[0], false],
    ]);
  });

  it('per-recipient content: static links get version 3, a link built from the recipient data keeps its URL in a version 1 token', async () => {
    const recipients = [
      { email: 'p1@dest.test', substitution_data: { uid: 'u-1' } },
      { email: 'p2@dest.test', substitution_data: { uid: 'u-2' } },
    ];
    await accept(t, HTML.replace('<p>Hi</p>', '<p>Hi {{uid}}</p>'), recipients);
    for (const r of recipients) {
      const tokens = clickTokens((await delivered(r.email)).parsed.html || '');
      expect(tokens.map(version)).toEqual([3, 3, 1, 3, 3]);
      const own = await click(tokens[2] as string);
      expect(own.statusCode).toBe(302);
      expect(own.headers.location).toBe(`https://shop.example/u/${r.substitution_data.uid}`);
      expect((await click(tokens[1] as string)).headers.location).toBe('https://shop.example/b');
    }
  });

  it('10,000 distinct links in one transmission: 10,000 rows, every token version 3, each click lands on its own URL', async () => {
    const n = 10_000;
    const url = (i: number) => `https://shop.example/item/${i}?ref=mail`;
    const html = `<html><body>${Array.from({ length: n }, (_, i) => `<a href="${url(i)}">${i}</a>`).join('\n')}</body></html>`;
    const txId = await accept(t, html, [{ email: 'tenk@dest.test' }]);
    const rows = await linkRows(txId);
    expect(rows.length).toBe(n);
    expect(rows[n - 1]).toEqual({ tenant_id: t.tenantId, idx: n - 1, url: url(n - 1) });
    const tokens = clickTokens((await delivered('tenk@dest.test')).parsed.html || '');
    expect(tokens.length).toBe(n);
    expect(tokens.every((x) => x.length === 51 && version(x) === 3)).toBe(true);
    for (const i of [0, 1, 4999, 7777, n - 1]) {
      const res = await click(tokens[i] as string);
      expect(res.statusCode).toBe(302);
      expect(res.headers.location).toBe(url(i));
    }
  }, 300_000);
});

describe('what the click route refuses', () => {
  it('tampered, foreign-key, unknown-message and other-tenant tokens, and a link number the transmission lacks: the same 404, nothing recorded', async () => {
    const txA = await accept(t, HTML, [{ email: 'ta@nowhere.test' }]);
    const txB = await accept(other, '<a href="https://other.example/only">o</a>', [{ email: 'tb@nowhere.test' }]);
    const a = await messageOf(txA, 'ta@nowhere.test');
    const b = await messageOf(txB, 'tb@nowhere.test');
    const good = signToken(key, { kind: 'click', messageId: b, link: 0, ref: 0 });
    expect((await click(good)).headers.location).toBe('https://other.example/only');
    const before = await clickedCount();

    const raw = Buffer.from(good, 'base64url');
    const tampered = [1, 18, 20, 21, raw.length - 1].map((i) => {
      const x = Buffer.from(raw);
      x[i] = (x[i] ?? 0) ^ 0x01;
      return x.toString('base64url');
    });
    const refused = [
      ...tampered,
      // signed by another installation
      signToken(deriveTokenKey(Buffer.alloc(32, 9)), { kind: 'click', messageId: b, link: 0, ref: 0 }),
      // a message that does not exist
      signToken(key, { kind: 'click', messageId: '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', link: 0, ref: 0 }),
      // tenant B's message naming link 2, which only tenant A's transmission has
      signToken(key, { kind: 'click', messageId: b, link: 0, ref: 2 }),
      signToken(key, { kind: 'click', messageId: a, link: 0, ref: 3 }),
      // a version 2 payload one byte longer, properly signed
      signed(Buffer.concat([Buffer.from([2]), raw.subarray(1, 22), Buffer.from([0])])),
      // the version 3 payload with a version 1/2 MAC instead of its own
      signed(raw.subarray(0, 22)),
    ];
    const answers = await Promise.all(refused.map(click));
    for (const res of answers) {
      expect(res.statusCode).toBe(404);
      expect(res.body).toBe('Not Found');
      expect(res.headers.location).toBeUndefined();
    }
    expect(
      new Set(answers.map((r) => JSON.stringify([r.headers['content-type'], r.headers['cache-control']]))).size,
    ).toBe(1);
    expect(await clickedCount()).toBe(before);
    // The row lookup itself is per tenant.
    expect(await linkUrl(ctx.c.database.db, other.tenantId, txA, 0)).toBeUndefined();
    expect(await linkUrl(ctx.c.database.db, t.tenantId, txA, 0)).toBe('https://shop.example/a?x=1&y=2');
  });

  it('mail sent with version 2 tokens (naming a link row, HMAC per token) still redirects and records', async () => {
    const txId = await accept(t, HTML, [{ email: 'v2@nowhere.test' }]);
    const messageId = await messageOf(txId, 'v2@nowhere.test');
    const old = version2Token(messageId, 1, 1);
    expect([version(old), old.length]).toEqual([2, 51]);
    const res = await click(old);
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('https://shop.example/b');
    // A link number the transmission lacks: the same 404 as for version 3.
    expect((await click(version2Token(messageId, 1, 7))).statusCode).toBe(404);
  });

  it('mail sent with version 1 tokens (the URL in the token) still redirects and records', async () => {
    const txId = await accept(t, HTML, [{ email: 'old@nowhere.test' }]);
    const messageId = await messageOf(txId, 'old@nowhere.test');
    const old = oldFormatToken(messageId, 4, 'https://legacy.example/path?q=1');
    expect(version(old)).toBe(1);
    const res = await click(old);
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('https://legacy.example/path?q=1');
    const ev = await ctx.c.database.db
      .selectFrom('events')
      .select('data')
      .where('message_id', '=', messageId)
      .where('type', '=', 'message.clicked')
      .execute();
    expect(ev.map((e) => JSON.parse(e.data))).toMatchObject([{ url: 'https://legacy.example/path?q=1', first: true }]);
  });
});
