import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';

let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  // A real database trigger makes the events insert fail for one recipient, late in the accept
  // transaction, after the transmission and message rows were written.
  if (DIALECT === 'sqlite') {
    await sql`CREATE TRIGGER fail_events BEFORE INSERT ON events WHEN NEW.recipient = 'boom@example.com' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`.execute(
      ctx.c.database.db,
    );
  } else {
    await sql`CREATE FUNCTION fail_events() RETURNS trigger AS $$ BEGIN IF NEW.recipient = 'boom@example.com' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`.execute(
      ctx.c.database.db,
    );
    await sql`CREATE TRIGGER fail_events BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION fail_events()`.execute(
      ctx.c.database.db,
    );
  }
});
afterAll(async () => ctx?.close());

async function counts() {
  const db = ctx.c.database.db;
  const n = async (table: 'transmissions' | 'messages' | 'events' | 'idempotency_keys') =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    transmissions: await n('transmissions'),
    messages: await n('messages'),
    events: await n('events'),
    keys: await n('idempotency_keys'),
  };
}

describe('accepting is one transaction', () => {
  it('a failure before commit leaves nothing half-written and answers a retryable 500', async () => {
    const before = await counts();
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      headers: { 'idempotency-key': 'atomic-1' },
      body: {
        recipients: [{ email: 'fine@example.com' }, { email: 'boom@example.com' }],
        content: { subject: 's', text: 't' },
      },
    });
    expect(res.statusCode).toBe(500);
    expect(res.json().errors[0].code).toBe('internal_error');
    expect(res.body).not.toMatch(/injected failure|at .*\.ts/);
    expect(await counts()).toEqual(before);
    // The same key works once the fault is gone: nothing final was stored for the 5xx.
    const ok = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      headers: { 'idempotency-key': 'atomic-1' },
      body: {
        recipients: [{ email: 'fine@example.com' }, { email: 'boom@example.com' }],
        content: { subject: 's', text: 't' },
      },
    });
    expect(ok.statusCode).toBe(500);
    await sql`DROP TRIGGER fail_events${DIALECT === 'postgres' ? sql` ON events` : sql``}`.execute(ctx.c.database.db);
    const ok2 = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      headers: { 'idempotency-key': 'atomic-1' },
      body: {
        recipients: [{ email: 'fine@example.com' }, { email: 'boom@example.com' }],
        content: { subject: 's', text: 't' },
      },
    });
    expect(ok2.statusCode).toBe(202);
    expect(ok2.headers['idempotent-replayed']).toBeUndefined();
  });
});
