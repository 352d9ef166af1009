/**
 * Issue 31, item 9: html-to-text walks the element tree by recursion, so deeply nested HTML
 * overflowed the call stack and a preview answered 500. HTML may nest at most MAX_HTML_DEPTH
 * (512) elements: deeper is 422 naming the field at save and accept, and at send (the depth
 * reached only once rendered) the message fails with `render_failed: html: ...`, nothing sent.
 * Delivery runs as configured by default (render threads on).
 */
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { htmlTooDeep, MAX_HTML_DEPTH } from '../../src/lib/html-depth.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';

const nested = (n: number, tag = 'ul') => `${`<${tag}>`.repeat(n)}deep${`</${tag}>`.repeat(n)}`;
/** Deep enough to overflow html-to-text on any stack (it overflowed from 1,413 `<ul>`). */
const BOMB = nested(20_000);

let ctx: TestContext;
let t: TestTenant;
let destination: Destination;
let worker: DeliveryWorker;
const signing = testSigningKey();

beforeAll(async () => {
  destination = await startDestination({ signing });
  ctx = await createTestContext({ env: destination.env });
  t = await createTenant(ctx, 'Shop <news@shop.test>');
  worker = startTestWorker(ctx.c, 'html-depth-worker', { signing });
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await destination?.close();
});

function errors(res: { json(): unknown }) {
  return (res.json() as { errors: { code: string; field?: string; message: string }[] }).errors;
}

async function template(body: Record<string, unknown>): Promise<string> {
  const res = await call(ctx.app, 'POST', '/v1/templates', {
    key: t.apiKey,
    body: { name: `t-${Math.random().toString(36).slice(2)}`, subject: 'Hi', ...body },
  });
  expect(res.statusCode, res.body.slice(0, 300)).toBe(201);
  const id = (res.json() as { id: string }).id;
  expect((await call(ctx.app, 'POST', `/v1/templates/${id}/publish`, { key: t.apiKey })).statusCode).toBe(200);
  return id;
}

describe('html nesting depth', () => {
  it('counts elements as the parser nests them (void elements and implied closes do not add up)', () => {
    expect(htmlTooDeep(nested(MAX_HTML_DEPTH))).toBe(false);
    expect(htmlTooDeep(nested(MAX_HTML_DEPTH + 1))).toBe(true);
    expect(htmlTooDeep(`${'<div>'.repeat(MAX_HTML_DEPTH + 1)}`)).toBe(true);
    // An unclosed <li> closes the previous one, an unclosed <p> the previous <p>; <br> and <img>
    // are void: flat, however many.
    expect(htmlTooDeep(`<ul>${'<li>x<br><img src="a.png">'.repeat(5000)}`)).toBe(false);
    expect(htmlTooDeep('<p>x'.repeat(5000))).toBe(false);
    // But a <p> inside an <li> keeps the next <li> open inside it: the parser (and html-to-text,
    // which overflows on it) nests these 10,000 deep, so the check does too.
    expect(htmlTooDeep(`<ul>${'<li><p>x'.repeat(5000)}`)).toBe(true);
  });

  it('saving a template whose html nests too deep is 422 naming html (create and update)', async () => {
    const res = await call(ctx.app, 'POST', '/v1/templates', {
      key: t.apiKey,
      body: { name: 'too-deep', subject: 'Hi', html: BOMB },
    });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    expect(errors(res)).toEqual([
      {
        code: 'validation_failed',
        field: 'html',
        message: `html: html nests elements more than ${MAX_HTML_DEPTH} deep`,
      },
    ]);

    const id = await template({ html: '<p>fine</p>' });
    const patch = await call(ctx.app, 'PATCH', `/v1/templates/${id}`, { key: t.apiKey, body: { html: BOMB } });
    expect(patch.statusCode, patch.body.slice(0, 300)).toBe(422);
    expect(errors(patch).map((e) => e.field)).toEqual(['html']);
  });

  it('accepting a transmission with inline html nesting too deep is 422 naming content.html', async () => {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: 'ann@dest.test' }], content: { subject: 'Hi', html: BOMB } },
    });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    expect(errors(res).map((e) => e.field)).toEqual(['content.html']);
    expect(errors(res)[0]?.message).toMatch(/more than 512 deep/);
  });

  it('a preview whose rendered html nests too deep is 422 naming html, not 500', async () => {
    const id = await template({ html: '<div>{{{body}}}</div>' });
    const res = await call(ctx.app, 'POST', `/v1/templates/${id}/preview`, {
      key: t.apiKey,
      body: { substitution_data: { body: BOMB } },
    });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    expect(errors(res)).toEqual([
      {
        code: 'validation_failed',
        field: 'html',
        message: `html: html nests elements more than ${MAX_HTML_DEPTH} deep`,
      },
    ]);
  });

  it('html at the limit (512 nested lists) is saved, previewed and gets its text part', async () => {
    const id = await template({ html: nested(MAX_HTML_DEPTH) });
    const res = await call(ctx.app, 'POST', `/v1/templates/${id}/preview`, { key: t.apiKey, body: {} });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect((res.json() as { text: string }).text).toContain('deep');
  });

  it('at send, a message whose rendered html nests too deep fails with render_failed naming html; nothing is sent for it', async () => {
    expect(ctx.c.config.renderThreads).toBeGreaterThanOrEqual(1);
    const id = await template({ html: '<div>{{{body}}}</div>' });
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: [
          { email: 'bomb@dest.test', substitution_data: { body: BOMB } },
          { email: 'fine@dest.test', substitution_data: { body: '<p>Hello</p>' } },
        ],
        content: { template_id: id },
      },
    });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(202);
    const txId = (res.json() as { transmission_id: string }).transmission_id;

    const end = Date.now() + 30_000;
    let states: { recipient: string; state: string; last_response: string | null }[] = [];
    for (;;) {
      states = await ctx.c.database.db
        .selectFrom('messages')
        .select(['recipient', 'state', 'last_response'])
        .where('transmission_id', '=', txId)
        .orderBy('recipient')
        .execute();
      if (states.every((m) => m.state !== 'queued' && m.state !== 'sending')) break;
      if (Date.now() > end) throw new Error(`still pending: ${JSON.stringify(states)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(states.map((m) => [m.recipient, m.state])).toEqual([
      ['bomb@dest.test', 'failed'],
      ['fine@dest.test', 'delivered'],
    ]);
    expect(states[0]?.last_response).toBe(`render_failed: html: html nests elements more than ${MAX_HTML_DEPTH} deep`);
    const sent = destination.sink.messages;
    expect(sent.some((m) => m.rcptTo.includes('bomb@dest.test'))).toBe(false);
    const fine = sent.find((m) => m.rcptTo.includes('fine@dest.test'));
    expect((await simpleParser(fine?.raw ?? Buffer.alloc(0))).text?.trim()).toBe('Hello');
  });
});
