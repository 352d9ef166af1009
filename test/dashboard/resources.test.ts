/**
 * The dashboard's JSON API over the real app (both backends): every page's calls go through the
 * same services as /v1, and one tenant's user never sees or touches another tenant's data.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTestContext, type TestContext } from '../helpers/context.ts';
import { startReceiver } from '../webhooks/helpers.ts';
import { type DashUser, signedInUser } from './helpers.ts';

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

describe('API keys', () => {
  it('creates a key that works on /v1 at once, lists it without the secret, and revokes it', async () => {
    const created = await alice.client.post('/dashboard/api/api-keys', { name: 'ci', scopes: ['manage:suppressions'] });
    expect(created.statusCode, created.body).toBe(201);
    const key = created.json() as { id: string; key: string; scopes: string[] };
    expect(key.key).toMatch(/^pyk_/);
    expect((await call(ctx.app, 'GET', '/v1/suppressions', { key: key.key })).statusCode).toBe(200);
    expect((await call(ctx.app, 'GET', '/v1/events', { key: key.key })).statusCode).toBe(403);

    const list = (await alice.client.get('/dashboard/api/api-keys')).json() as { data: Record<string, unknown>[] };
    const row = list.data.find((k) => k.id === key.id);
    expect(row).toMatchObject({ name: 'ci', scopes: ['manage:suppressions'], last_used_at: null });
    expect(row).not.toHaveProperty('key');

    expect(
      (await alice.client.post('/dashboard/api/api-keys', { name: 'x', scopes: ['read:everything'] })).statusCode,
    ).toBe(422);
    expect((await alice.client.delete(`/dashboard/api/api-keys/${key.id}`)).statusCode).toBe(204);
    expect((await call(ctx.app, 'GET', '/v1/suppressions', { key: key.key })).statusCode).toBe(401);
  });

  it('lists the scopes a key can hold', async () => {
    const res = await alice.client.get('/dashboard/api/scopes');
    expect(res.json().scopes).toHaveLength(10);
  });
});

describe('SMTP credentials', () => {
  it('creates (password once), lists and deletes', async () => {
    const res = await alice.client.post('/dashboard/api/smtp-credentials', { name: 'crm' });
    expect(res.statusCode).toBe(201);
    const cred = res.json() as { id: string; username: string; password: string };
    expect(await ctx.c.smtpCredentials.verify(cred.username, cred.password)).toMatchObject({
      tenantId: alice.tenant.tenantId,
    });
    const list = (await alice.client.get('/dashboard/api/smtp-credentials')).json() as {
      data: Record<string, unknown>[];
    };
    expect(list.data.map((c) => c.id)).toContain(cred.id);
    expect(list.data[0]).not.toHaveProperty('password');
    expect((await alice.client.delete(`/dashboard/api/smtp-credentials/${cred.id}`)).statusCode).toBe(204);
  });
});

describe('webhooks', () => {
  it('creates, edits, disables and enables, rotates, tests and lists deliveries', async () => {
    const receiver = await startReceiver(() => ({ status: 204 }));
    try {
      const created = await alice.client.post('/dashboard/api/webhooks', {
        url: receiver.url,
        name: 'hooks',
        events: ['message.delivered'],
      });
      expect(created.statusCode, created.body).toBe(201);
      const hook = created.json() as { id: string; secret: string };
      expect(hook.secret).toMatch(/^whsec_/);
      const id = hook.id;

      const edited = await alice.client.patch(`/dashboard/api/webhooks/${id}`, { name: 'renamed', events: ['*'] });
      expect(edited.json()).toMatchObject({ name: 'renamed', events: ['*'] });
      expect((await alice.client.patch(`/dashboard/api/webhooks/${id}`, { enabled: false })).json()).toMatchObject({
        enabled: false,
        status: 'disabled',
      });
      expect((await alice.client.patch(`/dashboard/api/webhooks/${id}`, { enabled: true })).json().status).toBe(
        'active',
      );
      expect((await alice.client.patch(`/dashboard/api/webhooks/${id}`, { events: ['no.such'] })).statusCode).toBe(422);

      const rotated = await alice.client.post(`/dashboard/api/webhooks/${id}/rotate-secret`);
      expect(rotated.json().secret).toMatch(/^whsec_/);
      expect(rotated.json().secret).not.toBe(hook.secret);

      const test = await alice.client.post(`/dashboard/api/webhooks/${id}/test`);
      expect(test.json()).toMatchObject({ delivered: true, status_code: 204, error: null });
      expect(receiver.received).toHaveLength(1);
      expect(JSON.parse(receiver.received[0]?.body ?? '{}').type).toBe('webhook.test');

      const deliveries = (await alice.client.get(`/dashboard/api/webhooks/${id}/deliveries`)).json();
      expect(deliveries.data[0]).toMatchObject({ outcome: 'delivered', status_code: 204, test: true });

      // Bob sees none of it and can change none of it.
      expect((await bob.client.get('/dashboard/api/webhooks')).json().data).toEqual([]);
      expect((await bob.client.patch(`/dashboard/api/webhooks/${id}`, { enabled: false })).statusCode).toBe(404);
      expect((await bob.client.post(`/dashboard/api/webhooks/${id}/test`)).statusCode).toBe(404);
      expect((await bob.client.get(`/dashboard/api/webhooks/${id}/deliveries`)).statusCode).toBe(404);

      expect((await alice.client.delete(`/dashboard/api/webhooks/${id}`)).statusCode).toBe(204);
      expect((await alice.client.get('/dashboard/api/webhooks')).json().data).toEqual([]);
    } finally {
      await receiver.close();
    }
  });
});

describe('suppressions', () => {
  it('adds (source dashboard), finds by identifier, deletes', async () => {
    const add = await alice.client.post('/dashboard/api/suppressions', {
      identifier: 'Ann@Example.COM',
      type: 'email',
      reason_category: 'manual',
      description: 'asked us',
    });
    expect(add.json()).toEqual({ created: 1, updated: 0 });
    const found = (await alice.client.get('/dashboard/api/suppressions?identifier=Ann@example.com')).json();
    expect(found.data).toHaveLength(1);
    expect(found.data[0]).toMatchObject({ identifier: 'ann@example.com', source: 'dashboard' });
    expect((await bob.client.get('/dashboard/api/suppressions')).json().data).toEqual([]);
    expect((await bob.client.delete(`/dashboard/api/suppressions/${found.data[0].id}`)).statusCode).toBe(404);
    expect((await alice.client.delete(`/dashboard/api/suppressions/${found.data[0].id}`)).statusCode).toBe(204);
    const bad = await alice.client.post('/dashboard/api/suppressions', {
      identifier: 'nope',
      type: 'email',
      reason_category: 'manual',
    });
    expect(bad.statusCode).toBe(422);
  });

  it('imports a CSV file and reports bad rows', async () => {
    const boundary = 'dashboardboundary';
    const csv =
      'identifier,type,reason_category\nx1@example.com,,\nnot-an-address,email,manual\nexample.org,domain,complaint\n';
    const raw =
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="s.csv"\r\nContent-Type: text/csv\r\n\r\n` +
      `${csv}\r\n--${boundary}--\r\n`;
    const res = await alice.client.request('POST', '/dashboard/api/suppressions/import', {
      raw,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ imported: 2, skipped: 1, errors: [{ line: 3 }] });
    const noCsrf = await alice.client.request('POST', '/dashboard/api/suppressions/import', {
      raw,
      csrf: null,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(noCsrf.statusCode).toBe(403);
  });
});

describe('sending domains', () => {
  it('adds a domain with its DNS records, lists it, and deletes it; other tenants cannot', async () => {
    const res = await alice.client.post('/dashboard/api/domains', { domain: 'mail.dash-test.example' });
    expect(res.statusCode, res.body).toBe(201);
    const d = res.json() as { id: string; dns_records: { type: string; name: string; status: string }[] };
    expect(d.dns_records.map((r) => r.status)).toEqual(d.dns_records.map(() => 'pending'));
    expect(d.dns_records.some((r) => r.name.includes('._domainkey.mail.dash-test.example'))).toBe(true);
    expect((await alice.client.get('/dashboard/api/domains')).json().data).toHaveLength(1);
    expect((await bob.client.post(`/dashboard/api/domains/${d.id}/verify`)).statusCode).toBe(404);
    expect((await bob.client.delete(`/dashboard/api/domains/${d.id}`)).statusCode).toBe(404);
    expect((await alice.client.delete(`/dashboard/api/domains/${d.id}`)).statusCode).toBe(204);
  });
});

describe('overview and activity', () => {
  it('counts sent mail in the overview, lists its events and shows the message', async () => {
    const sent = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: alice.tenant.apiKey,
      body: {
        recipients: [{ email: 'one@example.net' }, { email: 'two@example.net' }],
        content: { subject: 'Hi', text: 'Hello' },
      },
    });
    expect(sent.statusCode, sent.body).toBe(202);

    const stats = (await alice.client.get('/dashboard/api/stats?range=24h')).json();
    expect(stats).toMatchObject({
      range: '24h',
      bucket: 'hour',
      totals: { sent: 2, delivered: 0 },
      delivery_rate: null,
    });
    expect(stats.buckets).toHaveLength(24);
    expect(stats.buckets.at(-1).sent).toBe(2);
    const week = (await alice.client.get('/dashboard/api/stats?range=7d')).json();
    expect(week.buckets).toHaveLength(7);
    expect(week.totals.sent).toBe(2);
    expect((await alice.client.get('/dashboard/api/stats?range=1y')).statusCode).toBe(400);
    expect((await bob.client.get('/dashboard/api/stats')).json().totals.sent).toBe(0);

    const events = (
      await alice.client.get('/dashboard/api/events?type=message.accepted&recipient=one@example.net')
    ).json();
    expect(events.data).toHaveLength(1);
    const messageId = events.data[0].message_id as string;
    const message = await alice.client.get(`/dashboard/api/messages/${messageId}`);
    expect(message.json()).toMatchObject({ id: messageId, recipient: 'one@example.net', attempts: [] });
    expect((await bob.client.get(`/dashboard/api/messages/${messageId}`)).statusCode).toBe(404);
    expect((await bob.client.get('/dashboard/api/events')).json().data).toEqual([]);
    expect((await alice.client.get('/dashboard/api/events?type=nope')).statusCode).toBe(400);
  });
});
