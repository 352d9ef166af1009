/** Suppression scope (contract 14): `all` blocks every mail, `marketing` only marketing mail. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { csvUpload } from './multipart.ts';

let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

async function upsert(items: unknown[]) {
  return call(ctx.app, 'POST', '/v1/suppressions', { key: t.apiKey, body: { items } });
}

async function send(email: string, mailType: 'transactional' | 'marketing') {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: { recipients: [{ email }], content: { subject: 'Hi', text: 'Hello' }, options: { mail_type: mailType } },
  });
  expect(res.statusCode, res.body).toBe(202);
  // items lists only the recipients not accepted.
  const item = res.json().items[0] as { status: string; reason?: string } | undefined;
  return item ?? { status: res.json().total_accepted_recipients === 1 ? 'accepted' : 'missing' };
}

describe('suppression scope', () => {
  it('defaults to all, takes marketing, refuses anything else (422 naming items[i].scope)', async () => {
    const ok = await upsert([
      { identifier: 'all@scope.example', type: 'email', reason_category: 'manual' },
      { identifier: 'promo@scope.example', type: 'email', reason_category: 'unsubscribe', scope: 'marketing' },
    ]);
    expect(ok.statusCode, ok.body).toBe(200);
    const bad = await upsert([
      { identifier: 'x@scope.example', type: 'email', reason_category: 'manual', scope: 'some' },
    ]);
    expect(bad.statusCode).toBe(422);
    expect(bad.body).toContain('items[0].scope');
    const list = await call(ctx.app, 'GET', '/v1/suppressions?limit=100', { key: t.apiKey });
    const byId = Object.fromEntries(
      (list.json().data as { identifier: string; scope: string }[]).map((s) => [s.identifier, s.scope]),
    );
    expect(byId['all@scope.example']).toBe('all');
    expect(byId['promo@scope.example']).toBe('marketing');
    const filtered = await call(ctx.app, 'GET', '/v1/suppressions?scope=marketing', { key: t.apiKey });
    expect((filtered.json().data as { identifier: string }[]).map((s) => s.identifier)).toEqual([
      'promo@scope.example',
    ]);
    const one = await call(ctx.app, 'GET', `/v1/suppressions/${filtered.json().data[0].id}`, { key: t.apiKey });
    expect(one.json().scope).toBe('marketing');
  });

  it('an upsert can change the scope of an existing entry', async () => {
    await upsert([{ identifier: 'flip@scope.example', type: 'email', reason_category: 'manual' }]);
    const res = await upsert([
      { identifier: 'flip@scope.example', type: 'email', reason_category: 'manual', scope: 'marketing' },
    ]);
    expect(res.json()).toEqual({ created: 0, updated: 1 });
    const list = await call(ctx.app, 'GET', '/v1/suppressions?identifier=flip@scope.example', { key: t.apiKey });
    expect(list.json().data[0].scope).toBe('marketing');
  });

  it('CSV import reads an optional scope column (empty cell = all; a bad value skips the row)', async () => {
    const { payload, contentType } = csvUpload(
      'identifier,scope\ncsv-m@scope.example,marketing\ncsv-a@scope.example,\ncsv-bad@scope.example,weekly\n',
    );
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/v1/suppressions',
      headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType },
      payload,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().imported).toBe(2);
    expect(res.json().errors).toEqual([{ line: 4, message: 'scope must be one of all, marketing' }]);
    const m = await call(ctx.app, 'GET', '/v1/suppressions?identifier=csv-m@scope.example', { key: t.apiKey });
    expect(m.json().data[0].scope).toBe('marketing');
    const a = await call(ctx.app, 'GET', '/v1/suppressions?identifier=csv-a@scope.example', { key: t.apiKey });
    expect(a.json().data[0].scope).toBe('all');
  });

  it('a marketing suppression blocks marketing mail but not transactional mail; an all suppression blocks both', async () => {
    await upsert([
      { identifier: 'reader@scope.example', type: 'email', reason_category: 'unsubscribe', scope: 'marketing' },
      { identifier: 'gone@scope.example', type: 'email', reason_category: 'hard_bounce' },
      { identifier: 'promo-domain.example', type: 'domain', reason_category: 'manual', scope: 'marketing' },
    ]);
    expect(await send('reader@scope.example', 'marketing')).toMatchObject({
      status: 'suppressed',
      reason: 'unsubscribe',
    });
    expect((await send('reader@scope.example', 'transactional')).status).toBe('accepted');
    expect((await send('gone@scope.example', 'transactional')).status).toBe('suppressed');
    expect((await send('gone@scope.example', 'marketing')).status).toBe('suppressed');
    expect((await send('x@promo-domain.example', 'marketing')).status).toBe('suppressed');
    expect((await send('x@promo-domain.example', 'transactional')).status).toBe('accepted');
  });

  it('an automatic marketing suppression (unsubscribe) never narrows an existing all entry', async () => {
    await upsert([{ identifier: 'bounced@scope.example', type: 'email', reason_category: 'hard_bounce' }]);
    const rec = await ctx.c.suppressions.addAutomatic(ctx.c.database.db, t.tenantId, {
      identifier: 'bounced@scope.example',
      reason_category: 'unsubscribe',
      source: 'unsubscribe',
      scope: 'marketing',
    });
    expect(rec).toMatchObject({ scope: 'all', reason_category: 'hard_bounce' });
    const fresh = await ctx.c.suppressions.addAutomatic(ctx.c.database.db, t.tenantId, {
      identifier: 'new-unsub@scope.example',
      reason_category: 'unsubscribe',
      source: 'unsubscribe',
      scope: 'marketing',
    });
    expect(fresh).toMatchObject({ scope: 'marketing', source: 'unsubscribe', reason_category: 'unsubscribe' });
  });
});
