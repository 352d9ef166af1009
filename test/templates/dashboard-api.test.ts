/**
 * The dashboard's template calls (session-authenticated, same services as /v1): live render of
 * unsaved content with 422 naming part and line, send test through the accept path, and
 * another tenant's template is 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.ts';
import { type DashUser, signedInUser } from '../dashboard/helpers.ts';

let ctx: TestContext;
let alice: DashUser;
let bob: DashUser;
beforeAll(async () => {
  ctx = await createTestContext();
  alice = await signedInUser(ctx);
  bob = await signedInUser(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

describe('dashboard templates', () => {
  it('renders unsaved content live, with 422 naming the part and line of a syntax error', async () => {
    const ok = await alice.client.post('/dashboard/api/template-render', {
      subject: 'Hi {{first}}',
      html: '<p>{{first}} &amp; {{plan}}</p>',
      defaults: { plan: 'free' },
      substitution_data: { first: '<Ann>' },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ subject: 'Hi <Ann>', text: '<Ann> & free', html: '<p>&lt;Ann&gt; &amp; free</p>' });
    const bad = await alice.client.post('/dashboard/api/template-render', { subject: 's', html: 'a\n{{#each x}}' });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors[0]).toMatchObject({ field: 'html' });
    expect(bad.json().errors[0].message).toMatch(/^html: line 2: /);
  });

  it('creates, edits, publishes and sends a test of a template; another tenant gets 404', async () => {
    const created = await alice.client.post('/dashboard/api/templates', {
      name: 'dash',
      subject: 'Hello {{first}}',
      text: 'Hi {{first}}',
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    expect(
      (await alice.client.patch(`/dashboard/api/templates/${id}`, { subject: 'Hey {{first}}' })).json().draft.version,
    ).toBe(2);
    expect((await alice.client.post(`/dashboard/api/templates/${id}/publish`)).json().published.version).toBe(2);
    const sent = await alice.client.post(`/dashboard/api/templates/${id}/send-test`, {
      email: 'tester@example.net',
      substitution_data: { first: 'Ann' },
    });
    expect(sent.statusCode, sent.body).toBe(202);
    const txId = sent.json().transmission_id as string;
    const row = await ctx.c.database.db
      .selectFrom('transmissions')
      .select(['content', 'tags', 'tenant_id'])
      .where('id', '=', txId)
      .executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(alice.tenant.tenantId);
    expect(JSON.parse(row.content)).toMatchObject({ template_id: id, template_version: 2, subject: 'Hey {{first}}' });
    const bad = await alice.client.post(`/dashboard/api/templates/${id}/send-test`, { email: 'nope' });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors[0]).toMatchObject({ field: 'email' });

    for (const [method, path] of [
      ['GET', ''],
      ['PATCH', ''],
      ['POST', '/publish'],
      ['POST', '/send-test'],
      ['POST', '/preview'],
      ['GET', '/versions'],
      ['DELETE', ''],
    ] as const) {
      const body =
        method === 'PATCH'
          ? { subject: 'x' }
          : path === '/send-test'
            ? { email: 'x@example.net' }
            : path === '/preview'
              ? {}
              : undefined;
      const res = await bob.client.request(method, `/dashboard/api/templates/${id}${path}`, body ? { body } : {});
      expect(res.statusCode, `${method} ${path}`).toBe(404);
    }
    expect((await alice.client.delete(`/dashboard/api/templates/${id}`)).statusCode).toBe(204);
  });
});
