/**
 * Accepting mail that uses the template language (docs/templates.md "Sending"): content.template_id
 * (+ use_draft), the copy of the version stored with the transmission, 422s on
 * content.template_id and on inline content's syntax (naming content.<part> and the line).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';

let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  a = await createTenant(ctx);
  b = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

let seq = 0;
async function template(t: TestTenant, body: Record<string, unknown> = {}, publish = true): Promise<string> {
  const res = await call(ctx.app, 'POST', '/v1/templates', {
    key: t.apiKey,
    body: { name: `send-${++seq}`, subject: 'Hello {{name}}', text: 'Hi {{name}} ({{plan}})', ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = (res.json() as { id: string }).id;
  if (publish)
    expect((await call(ctx.app, 'POST', `/v1/templates/${id}/publish`, { key: t.apiKey })).statusCode).toBe(200);
  return id;
}

async function send(t: TestTenant, body: Record<string, unknown>) {
  return call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: { recipients: [{ email: 'r1@example.net', substitution_data: { name: 'Ann' } }], ...body },
  });
}

async function storedContent(transmissionId: string): Promise<Record<string, unknown>> {
  const row = await ctx.c.database.db
    .selectFrom('transmissions')
    .select('content')
    .where('id', '=', transmissionId)
    .executeTakeFirstOrThrow();
  return JSON.parse(row.content) as Record<string, unknown>;
}

describe('content.template_id', () => {
  it('accepts a published template and stores a copy of its version with the merged data', async () => {
    const id = await template(a, { defaults: { plan: 'free', name: 'friend' }, headers: { 'X-Plan': '{{plan}}' } });
    const res = await send(a, { content: { template_id: id }, substitution_data: { plan: 'pro' } });
    expect(res.statusCode, res.body).toBe(202);
    const txId = (res.json() as { transmission_id: string }).transmission_id;
    expect(await storedContent(txId)).toMatchObject({
      template_id: id,
      template_version: 1,
      subject: 'Hello {{name}}',
      text: 'Hi {{name}} ({{plan}})',
      html: null,
      from: 'Test <sender@example.com>',
      headers: { 'X-Plan': '{{plan}}' },
      substitution_data: { plan: 'pro', name: 'friend' },
    });
    // A later save and publish does not change what was accepted.
    await call(ctx.app, 'PATCH', `/v1/templates/${id}`, { key: a.apiKey, body: { subject: 'Changed' } });
    await call(ctx.app, 'POST', `/v1/templates/${id}/publish`, { key: a.apiKey });
    expect(await storedContent(txId)).toMatchObject({ subject: 'Hello {{name}}', template_version: 1 });
    const later = await send(a, { content: { template_id: id } });
    expect(await storedContent((later.json() as { transmission_id: string }).transmission_id)).toMatchObject({
      subject: 'Changed',
      template_version: 2,
    });
  });

  it('sends the draft only with use_draft: true; an unpublished template is 422 otherwise', async () => {
    const id = await template(a, {}, false);
    const res = await send(a, { content: { template_id: id } });
    expect(expectError(res, 422, 'validation_failed').errors[0]).toMatchObject({ field: 'content.template_id' });
    const draft = await send(a, { content: { template_id: id, use_draft: true } });
    expect(draft.statusCode, draft.body).toBe(202);
  });

  it('answers 422 on content.template_id for an unknown id, a non-UUID and another tenant’s template', async () => {
    const theirs = await template(b);
    for (const templateId of ['0193a1b2-0000-7000-8000-000000000000', 'nope', theirs]) {
      const res = await send(a, { content: { template_id: templateId } });
      expect(expectError(res, 422, 'validation_failed').errors[0], templateId).toMatchObject({
        field: 'content.template_id',
      });
    }
  });

  it('refuses template_id combined with subject, text or html', async () => {
    const id = await template(a);
    const res = await send(a, { content: { template_id: id, subject: 'x', text: 'y' } });
    const e = expectError(res, 422, 'validation_failed').errors[0];
    expect(e).toMatchObject({ field: 'content.template_id' });
    expect(e?.message).toMatch(/subject, text/);
  });

  it('lets the request override from and add headers over the template’s', async () => {
    const id = await template(a, { from: 'Shop <shop@example.com>', headers: { 'X-A': 'a', 'X-B': 'b' } });
    const res = await send(a, {
      content: { template_id: id, from: 'Other <other@example.com>', headers: { 'X-B': 'mine' } },
    });
    expect(res.statusCode, res.body).toBe(202);
    expect(await storedContent((res.json() as { transmission_id: string }).transmission_id)).toMatchObject({
      from: 'Other <other@example.com>',
      headers: { 'X-A': 'a', 'X-B': 'mine' },
    });
  });
});

describe('inline content uses the same language', () => {
  it('answers 422 naming content.<part> and the line of a syntax error', async () => {
    const res = await send(a, {
      content: {
        subject: 'Hi {{name',
        text: 'ok {{name}}',
        html: '<p>\n\n{{#each items}}</p>',
        headers: { 'X-T': '{{> p}}' },
      },
    });
    expect(res.statusCode).toBe(422);
    const errs = (res.json() as { errors: { field: string; message: string }[] }).errors;
    expect(errs.map((e) => e.field).sort()).toEqual(['content.headers.X-T', 'content.html', 'content.subject']);
    expect(errs.find((e) => e.field === 'content.html')?.message).toMatch(/^content\.html: line 3: /);
  });

  it('still requires a subject without template_id', async () => {
    const res = await send(a, { content: { text: 'x' } });
    expect(expectError(res, 422, 'validation_failed').errors[0]).toMatchObject({ field: 'content.subject' });
  });

  it('stores top-level substitution_data with the content', async () => {
    const res = await send(a, {
      content: { subject: 'Hi {{name}}', text: '{{greeting}}' },
      substitution_data: { greeting: 'Hello' },
    });
    expect(res.statusCode, res.body).toBe(202);
    expect(await storedContent((res.json() as { transmission_id: string }).transmission_id)).toMatchObject({
      template_id: null,
      template_version: null,
      substitution_data: { greeting: 'Hello' },
    });
  });
});
