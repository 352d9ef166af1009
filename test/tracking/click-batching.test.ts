/**
 * The click path's batching and caches (src/modules/tracking/tracking.service.ts): clicks of one
 * event-loop turn written together still get one `first` per link and one event each, and a
 * message's facts are only kept once its state can no longer change `machine`. Both backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;

/** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
const publicHost = () => new URL(ctx.c.config.publicUrl).host;
let t: TestTenant;
let key: Buffer;
const PERSON_UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  key = deriveTokenKey(ctx.c.masterKey);
});
afterAll(async () => ctx?.close());

async function accept(email: string): Promise<string> {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email }],
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

async function setDelivered(messageId: string, agoMs: number) {
  await ctx.c.database.db
    .updateTable('messages')
    .set({ state: 'delivered', updated_at: new Date(Date.now() - agoMs).toISOString() })
    .where('id', '=', messageId)
    .execute();
}

async function clicks(messageId: string) {
  const rows = await ctx.c.database.db
    .selectFrom('events')
    .select('data')
    .where('message_id', '=', messageId)
    .where('type', '=', 'message.clicked')
    .orderBy('id')
    .execute();
  return rows.map((r) => JSON.parse(r.data) as { url: string; first: boolean; machine: boolean });
}

const click = (tok: string, ip = '198.51.100.20') =>
  ctx.app.inject({
    method: 'GET',
    url: `/c/${tok}`,
    headers: { host: publicHost(), 'user-agent': PERSON_UA },
    remoteAddress: ip,
  });

describe('click batching and caches', () => {
  it('30 clicks at once on 3 links: 30 redirects, 30 events, exactly one first per link', async () => {
    const messageId = await accept('batch@track.example');
    await setDelivered(messageId, 3_600_000);
    const urls = [0, 1, 2].map((i) => `https://shop.example/item/${i}`);
    const toks = urls.map((url, link) => signToken(key, { kind: 'click', messageId, link, url }));
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => click(toks[i % 3] as string)));
    expect(answers.map((a) => a.statusCode)).toEqual(Array(30).fill(302));
    expect(answers.map((a) => a.headers.location)).toEqual(Array.from({ length: 30 }, (_, i) => urls[i % 3]));
    const ev = await clicks(messageId);
    expect(ev).toHaveLength(30);
    for (const url of urls) {
      expect(ev.filter((e) => e.url === url && e.first)).toHaveLength(1);
      expect(ev.filter((e) => e.url === url)).toHaveLength(10);
    }
    expect(ev.every((e) => !e.machine)).toBe(true);
    // Later clicks (facts and firsts now from memory) are recorded, never first again.
    expect((await click(toks[0] as string)).statusCode).toBe(302);
    const after = await clicks(messageId);
    expect(after).toHaveLength(31);
    expect(after[30]).toMatchObject({ url: urls[0], first: false, machine: false });
  });

  it('a queued message is read again on each click: once delivered seconds ago, its clicks are machine', async () => {
    const messageId = await accept('fresh@track.example');
    const tok = signToken(key, { kind: 'click', messageId, link: 0, url: 'https://shop.example/' });
    expect((await click(tok)).statusCode).toBe(302);
    await setDelivered(messageId, 1_000);
    expect((await click(tok)).statusCode).toBe(302);
    await setDelivered(messageId, 3_600_000);
    expect((await click(tok)).statusCode).toBe(302);
    expect((await clicks(messageId)).map((e) => [e.first, e.machine])).toEqual([
      [true, false], // not delivered yet: no timing rule
      [false, true], // a second after delivery: a link scanner
      [false, false], // an hour after: a person
    ]);
  });

  it('a token of a message that does not exist is 404 however many arrive at once', async () => {
    const tok = signToken(key, {
      kind: 'click',
      messageId: '00000000-0000-4000-8000-000000000000',
      link: 0,
      url: 'https://shop.example/',
    });
    const real = await accept('mixed@track.example');
    const good = signToken(key, { kind: 'click', messageId: real, link: 0, url: 'https://shop.example/' });
    const answers = await Promise.all([click(tok), click(good), click(tok), click(good)]);
    expect(answers.map((a) => a.statusCode)).toEqual([404, 302, 404, 302]);
  });
});
