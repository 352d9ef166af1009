/**
 * Issue 13 item 2: one rule for "the same address" everywhere. `Ann@x.test` and `ann@x.test` are
 * duplicates in a transmission, so a suppression of one must stop the other, imports and filters
 * must agree, and rows stored before the rule (upper-case local parts) are folded by migration 009.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as m009 from '../../src/db/migrations/009_email_identifier_case.ts';
import { newId } from '../../src/lib/ids.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { csvUpload } from './multipart.ts';

let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

function suppress(identifiers: string[], tenant = t) {
  return call(ctx.app, 'POST', '/v1/suppressions', {
    key: tenant.apiKey,
    body: { items: identifiers.map((identifier) => ({ identifier, type: 'email', reason_category: 'unsubscribe' })) },
  });
}

async function send(emails: string[], tenant = t) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: tenant.apiKey,
    body: { recipients: emails.map((email) => ({ email })), content: { subject: 'Hi', text: 'Hello' } },
  });
  expect(res.statusCode, res.body).toBe(202);
  return res.json() as {
    transmission_id: string;
    items: { email: string; status: string }[];
    total_accepted_recipients: number;
  };
}

async function listByIdentifier(identifier: string, tenant = t) {
  const res = await call(ctx.app, 'GET', '/v1/suppressions', { key: tenant.apiKey, query: { identifier } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().data as { identifier: string; reason_category: string }[]).map((s) => s.identifier);
}

describe('one normalisation of addresses: accept, suppressions, filters', () => {
  it('a suppression stops every case variant of the address, in both directions', async () => {
    expect((await suppress(['Ann@Case.test'])).statusCode).toBe(200);
    const lower = await send(['ann@case.test']);
    expect(lower.total_accepted_recipients).toBe(0);
    expect(lower.items).toEqual([expect.objectContaining({ email: 'ann@case.test', status: 'suppressed' })]);

    expect((await suppress(['bob@case.test'])).statusCode).toBe(200);
    const upper = await send(['BOB@case.test']);
    expect(upper.total_accepted_recipients).toBe(0);
    expect(upper.items).toEqual([expect.objectContaining({ status: 'suppressed' })]);

    // De-duplication and suppression agree: Ann and ann are one recipient, suppressed once.
    const mixed = await send(['Ann@case.test', 'ann@CASE.test', 'carl@case.test']);
    expect(mixed.total_accepted_recipients).toBe(1);
    expect(mixed.items.map((i) => i.status).sort()).toEqual(['duplicate', 'suppressed']);
  });

  it('JSON upsert, CSV import and the identifier filter use the same identity', async () => {
    const json = await suppress(['Dora@Case.test', 'dora@case.test']);
    expect(json.json()).toEqual({ created: 1, updated: 0 });
    expect(await listByIdentifier('DORA@case.TEST')).toEqual(['dora@case.test']);

    const { payload, contentType } = csvUpload('identifier\nERIC@case.test\neric@Case.test\n');
    const imported = await ctx.app.inject({
      method: 'POST',
      url: '/v1/suppressions',
      headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType },
      payload,
    });
    expect(imported.statusCode, imported.body).toBe(200);
    expect(await listByIdentifier('Eric@CASE.test')).toEqual(['eric@case.test']);
    expect((await send(['Eric@case.test'])).total_accepted_recipients).toBe(0);
  });

  it('the events recipient filter finds an address whatever its case', async () => {
    const tx = await send(['Fay@Case.test']);
    expect(tx.total_accepted_recipients).toBe(1);
    for (const recipient of ['fay@case.test', 'FAY@CASE.TEST', 'Fay@Case.test']) {
      const res = await call(ctx.app, 'GET', '/v1/events', {
        key: t.apiKey,
        query: { recipient, transmission_id: tx.transmission_id },
      });
      expect(res.statusCode, res.body).toBe(200);
      const events = res.json().data as { type: string; recipient: string }[];
      expect(
        events.map((e) => [e.type, e.recipient]),
        recipient,
      ).toEqual([['message.accepted', 'fay@case.test']]);
    }
  });
});

describe('migration 009: identifiers stored before the rule', () => {
  it('lower-cases stored email identifiers and keeps the newest row of each address', async () => {
    const mine = await createTenant(ctx);
    const other = await createTenant(ctx);
    const at = (day: number) => `2026-01-0${day}T00:00:00.000Z`;
    const row = (tenant: TestTenant, identifier: string, type: string, reason: string, day: number) => ({
      tenant_id: tenant.tenantId,
      id: newId(),
      identifier,
      type,
      reason_category: reason,
      description: null,
      source: 'api',
      created_at: at(day),
      updated_at: at(day),
    });
    // Written as older versions stored them (local part as given), bypassing today's normaliser.
    await ctx.c.database.db
      .insertInto('suppressions')
      .values([
        row(mine, 'Gus@case.test', 'email', 'hard_bounce', 2),
        row(mine, 'gus@case.test', 'email', 'manual', 1),
        row(mine, 'GUS@case.test', 'email', 'complaint', 3),
        row(mine, 'Hal@case.test', 'email', 'unsubscribe', 1),
        row(mine, 'case.test', 'domain', 'manual', 1),
        row(other, 'Gus@case.test', 'email', 'invalid', 1),
      ])
      .execute();

    await m009.up(ctx.c.database.db);
    await m009.up(ctx.c.database.db); // a second run changes nothing

    const rows = await ctx.c.database.db
      .selectFrom('suppressions')
      .select(['tenant_id', 'identifier', 'type', 'reason_category'])
      .where('tenant_id', 'in', [mine.tenantId, other.tenantId])
      .orderBy('tenant_id')
      .orderBy('identifier')
      .execute();
    const view = (tenant: TestTenant) =>
      rows.filter((r) => r.tenant_id === tenant.tenantId).map((r) => [r.identifier, r.type, r.reason_category]);
    expect(view(mine)).toEqual([
      ['case.test', 'domain', 'manual'],
      ['gus@case.test', 'email', 'complaint'],
      ['hal@case.test', 'email', 'unsubscribe'],
    ]);
    expect(view(other)).toEqual([['gus@case.test', 'email', 'invalid']]);
  });
});
