/** Every client method against the real server: the typed calls work end to end. */
import { Postyard, PostyardError, type Suppression } from '@postyard/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, type LiveServer, MAIL, startLiveServer } from './helpers.ts';

let live: LiveServer;
let client: Postyard;

beforeAll(async () => {
  // A bounce host, so new domains list the SPF and return-path records too (without one they are left out).
  live = await startLiveServer({ env: { POSTYARD_BOUNCE_HOST: 'bounces.postyard-test.example' } });
  client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
});
afterAll(async () => {
  await live?.close();
});

describe('transmissions and messages', () => {
  it('send, get the transmission, get its message', async () => {
    const accepted = await client.transmissions.send({
      ...MAIL,
      options: { tags: ['welcome'], metadata: { crm_id: '42' } },
    });
    expect(accepted).toMatchObject({ items: [], total_accepted_recipients: 1, total_rejected_recipients: 0 });
    const tx = await client.transmissions.get(accepted.transmission_id);
    expect(tx.tags).toEqual(['welcome']);
    const messageId = tx.messages[0]?.id as string;
    const message = await client.messages.get(messageId);
    expect(message).toMatchObject({ transmission_id: accepted.transmission_id, recipient: 'ann@example.com' });
  });
});

describe('suppressions', () => {
  it('upsert, get, list with filters, delete', async () => {
    const res = await client.suppressions.upsert({
      items: [{ identifier: 'Bob@Example.COM', type: 'email', reason_category: 'manual', description: 'asked' }],
    });
    expect(res).toEqual({ created: 1, updated: 0 });
    const page = await client.suppressions.list({ identifier: 'Bob@EXAMPLE.com' });
    const s = page.data[0] as Suppression;
    expect(s).toMatchObject({ identifier: 'bob@example.com', type: 'email', source: 'api' });
    expect(await client.suppressions.get(s.id)).toEqual(s);
    await client.suppressions.delete(s.id);
    await expect(client.suppressions.get(s.id)).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });

  it('imports CSV (string, bytes or Blob) and reports bad rows by line', async () => {
    const csv =
      'identifier,type,reason_category\nc1@example.com,email,manual\nnot an address,email,manual\nd.example,domain,\n';
    const res = await client.suppressions.import(csv);
    expect(res).toEqual({ imported: 2, skipped: 1, errors: [expect.objectContaining({ line: 3 })] });
    const again = await client.suppressions.import(new TextEncoder().encode('identifier\nc2@example.com\n'));
    expect(again).toMatchObject({ imported: 1, skipped: 0 });
  });

  it('iterate() yields every item exactly once across pages, even with inserts during the walk', async () => {
    const items = Array.from({ length: 120 }, (_, i) => ({
      identifier: `walk${i}@iterate.example`,
      type: 'email' as const,
      reason_category: 'manual' as const,
    }));
    await client.suppressions.upsert({ items });
    const seen: string[] = [];
    let inserted = false;
    for await (const s of client.suppressions.iterate({ type: 'email', limit: 17 })) {
      if (s.identifier.endsWith('@iterate.example')) seen.push(s.identifier);
      if (!inserted) {
        inserted = true; // newer than the cursor: must not appear in this walk, nor shift it
        await client.suppressions.upsert({
          items: [{ identifier: 'late@iterate.example', type: 'email', reason_category: 'manual' }],
        });
      }
    }
    expect(seen).toHaveLength(120);
    expect(new Set(seen)).toEqual(new Set(items.map((i) => i.identifier)));
    const domains: string[] = [];
    for await (const s of client.suppressions.iterate({ type: 'domain' })) domains.push(s.identifier);
    expect(domains).toEqual(['d.example']);
  });
});

describe('webhooks', () => {
  it('create, get, list, update, rotate, test, deliveries, delete', async () => {
    const hook = await client.webhooks.create({ url: 'http://127.0.0.1:9/hook', events: ['message.delivered'] });
    expect(hook.secret).toMatch(/^whsec_/);
    expect(await client.webhooks.get(hook.id)).toMatchObject({ id: hook.id, dispatch_policy: 'single' });
    const ids: string[] = [];
    for await (const w of client.webhooks.iterate()) ids.push(w.id);
    expect(ids).toContain(hook.id);
    expect((await client.webhooks.list({ limit: 1 })).data).toHaveLength(1);
    const updated = await client.webhooks.update(hook.id, { name: 'renamed', dispatch_policy: 'batch' });
    expect(updated).toMatchObject({ name: 'renamed', dispatch_policy: 'batch' });
    const rotated = await client.webhooks.rotateSecret(hook.id);
    expect(rotated.secret).not.toBe(hook.secret);
    const test = await client.webhooks.test(hook.id);
    expect(test).toMatchObject({ delivered: false, status_code: null });
    const log = await client.webhooks.deliveries(hook.id);
    expect(log.data[0]).toMatchObject({ test: true, outcome: 'failed' });
    const all = [];
    for await (const d of client.webhooks.iterateDeliveries(hook.id, { limit: 1 })) all.push(d);
    expect(all).toHaveLength(1);
    await client.webhooks.delete(hook.id);
    await expect(client.webhooks.get(hook.id)).rejects.toBeInstanceOf(PostyardError);
  });

  it('a replayed create (same Idempotency-Key) returns the same webhook with secret null', async () => {
    const first = await client.webhooks.create({ url: 'http://127.0.0.1:9/a' }, { idempotencyKey: 'hook-a' });
    const replay = await client.webhooks.create({ url: 'http://127.0.0.1:9/a' }, { idempotencyKey: 'hook-a' });
    expect(replay).toMatchObject({ id: first.id, secret: null });
  });
});

describe('events', () => {
  it('list and iterate with filters', async () => {
    const { transmission_id } = await client.transmissions.send(MAIL);
    const page = await client.events.list({ transmission_id, type: 'message.accepted' });
    expect(page.data.map((e) => e.type)).toEqual(['message.accepted']);
    const types: string[] = [];
    for await (const e of client.events.iterate({ transmission_id, limit: 1 })) types.push(e.type);
    expect(types).toEqual(['message.accepted']);
    await expect(client.events.list({ type: 'nope' })).rejects.toMatchObject({
      status: 400,
      code: 'invalid_parameter',
      errors: [expect.objectContaining({ field: 'type' })],
    });
  });
});

describe('api keys and SMTP credentials', () => {
  it('create (secret once), list, iterate, delete', async () => {
    const key = await client.apiKeys.create({ name: 'web app', scopes: ['send:transmissions'] });
    expect(key.key).toMatch(/^pyk_/);
    const narrow = new Postyard({ apiKey: key.key as string, baseUrl: live.baseUrl });
    await expect(narrow.events.list()).rejects.toMatchObject({ status: 403, code: 'insufficient_scope' });
    const names: string[] = [];
    for await (const k of client.apiKeys.iterate()) names.push(k.name);
    expect(names).toContain('web app');
    expect((await client.apiKeys.list()).data.every((k) => !('key' in k))).toBe(true);
    await client.apiKeys.delete(key.id);
    const before = await countRows(live.ctx, 'api_keys', live.tenant.tenantId);
    expect(before).toBeGreaterThan(0);

    const cred = await client.smtpCredentials.create({ name: 'crm' });
    expect(cred.password).toBeTruthy();
    expect((await client.smtpCredentials.list()).data.map((c) => c.id)).toContain(cred.id);
    const creds = [];
    for await (const c of client.smtpCredentials.iterate()) creds.push(c);
    expect(creds).toHaveLength(1);
    await client.smtpCredentials.delete(cred.id);
    expect((await client.smtpCredentials.list()).data).toHaveLength(0);
  });
});

describe('sending domains', () => {
  it('create, get, list, iterate, verify, delete', async () => {
    const d = await client.sendingDomains.create({ domain: 'Mail.Client-Test.example' });
    expect(d).toMatchObject({ domain: 'mail.client-test.example', status: 'pending' });
    expect(d.dns_records.map((r) => r.purpose)).toEqual(
      expect.arrayContaining(['dkim', 'spf', 'return_path', 'dmarc']),
    );
    expect(await client.sendingDomains.get(d.id)).toMatchObject({ id: d.id });
    expect((await client.sendingDomains.list()).data.map((x) => x.id)).toContain(d.id);
    const all = [];
    for await (const x of client.sendingDomains.iterate()) all.push(x);
    expect(all).toHaveLength(1);
    const verified = await client.sendingDomains.verify(d.id);
    expect(verified.dns_records[0]?.last_checked_at).not.toBeNull();
    await client.sendingDomains.delete(d.id);
    await expect(client.sendingDomains.get(d.id)).rejects.toMatchObject({ status: 404 });
  });
});
