/**
 * The shared group commit (src/db/group-commit.ts) as SMTP submission uses it: concurrent
 * messages share a transaction (SQLite and PostgreSQL), each caller gets its own result, and a failing
 * message never takes its batch neighbours down with it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GroupCommit } from '../../src/db/group-commit.ts';
import { AppError } from '../../src/lib/errors.ts';
import { prepareSubmission } from '../../src/smtp/submission.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { message, transmissionRows } from './helpers.ts';

let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

function input(subject: string) {
  return prepareSubmission(Buffer.from(message({ subject })), {
    mailFrom: 'shop@example.com',
    rcptTo: ['ann@example.com'],
  }).input;
}

it('concurrent messages are committed together; a failing one is answered alone, the others stored', async () => {
  let transactions = 0;
  const db = ctx.c.database;
  const counting = {
    ...db,
    db: new Proxy(db.db, {
      get(target, prop) {
        if (prop === 'transaction' || prop === 'startTransaction') transactions++;
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }),
  };
  const group = new GroupCommit(counting);
  const accept = (subject: string) =>
    group.run((trx) => {
      if (subject === 'bad') return Promise.reject(new AppError('sender_domain_not_verified', 'not verified'));
      return ctx.c.transmissions.accept(trx, t.tenantId, input(subject));
    });

  // Messages arriving together share one transaction, on both databases.
  const ok = await Promise.all(Array.from({ length: 10 }, (_, i) => accept(`ok ${i}`)));
  expect(new Set(ok.map((r) => r.transmission_id)).size).toBe(10);
  expect(transactions).toBe(1);

  const settled = await Promise.allSettled(['first', 'a', 'b', 'bad', 'c'].map(accept));
  expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
  expect((settled[3] as PromiseRejectedResult).reason).toMatchObject({ code: 'sender_domain_not_verified' });
  const rows = await transmissionRows(ctx, t.tenantId);
  expect(rows).toHaveLength(14);
  const subjects = rows.map((r) => (JSON.parse(r.content) as { subject: string }).subject);
  expect(subjects).not.toContain('bad');
  for (const s of ['first', 'a', 'b', 'c']) expect(subjects).toContain(s);
});
