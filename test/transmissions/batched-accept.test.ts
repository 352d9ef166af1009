/**
 * Batched accepts (issue 19, src/db/group-commit.ts `runBuffered`): concurrent accepts share one
 * transaction and their rows go in with one multi-row INSERT per table, on SQLite and PostgreSQL.
 * A member that fails (in its own code, in an SQL statement that aborts a PostgreSQL transaction,
 * or in the multi-row flush of its rows) fails alone; every other member is stored exactly once.
 * On PostgreSQL, the batch's connection being terminated (what a server restart does to it) loses
 * and duplicates nothing.
 */
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { insertMany } from '../../src/db/batch.ts';
import type { DB } from '../../src/db/schema.ts';
import { AppError } from '../../src/lib/errors.ts';
import { prepareSubmission } from '../../src/smtp/submission.ts';
import { createTenant, createTestContext, DIALECT, type TestContext, type TestTenant } from '../helpers/context.ts';
import { message } from '../smtp/helpers.ts';
import { countingGroupCommit, input, NONE, ONCE, restartMidBatch, storedRows } from './batch-harness.ts';

let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

const stored = (subject: string) => storedRows(ctx, t.tenantId, subject);
const counting = () => countingGroupCommit(ctx.c.database);
const accept = (trx: Transaction<DB>, subject: string) => ctx.c.transmissions.accept(trx, t.tenantId, input(subject));

it('concurrent accepts share one transaction and one multi-row INSERT per table', async () => {
  const { group, stats } = counting();
  const subjects = Array.from({ length: 12 }, (_, i) => `together ${i}`);
  const res = await Promise.all(subjects.map((s) => group.runBuffered((trx) => accept(trx, s))));
  expect(new Set(res.map((r) => r.transmission_id)).size).toBe(12);
  expect(stats.transactions).toBe(1);
  // transmissions, messages, events, webhook_outbox (no tags): 4 statements for 12 accepts on
  // SQLite, one statement on PostgreSQL (each statement is a round trip there).
  expect(stats.inserts).toBe(DIALECT === 'postgres' ? 1 : 4);
  // PostgreSQL: the accepts run at the same time and ask for their suppressions in one statement.
  expect(stats.lookups).toBe(DIALECT === 'postgres' ? 1 : 12);
  for (const s of subjects) expect(await stored(s)).toEqual(ONCE);
});

it('suppressions asked for a whole batch at once still apply to each accept and tenant alone', async () => {
  const other = await createTenant(ctx);
  const suppress = (tenantId: string, identifier: string, type: 'email' | 'domain') =>
    ctx.c.suppressions.upsertPrepared(
      tenantId,
      ctx.c.suppressions.prepareItems([{ identifier, type, reason_category: 'manual' }]),
      ctx.c.database.db,
    );
  await suppress(t.tenantId, 'gone@example.com', 'email');
  await suppress(t.tenantId, 'blocked.example', 'domain');
  await suppress(other.tenantId, 'other-gone@example.com', 'email');
  const { group, stats } = counting();
  const send = (tenantId: string, rcptTo: string[]) =>
    group.runBuffered((trx) =>
      ctx.c.transmissions.accept(
        trx,
        tenantId,
        prepareSubmission(Buffer.from(message({ subject: 'lookup' })), { mailFrom: 'shop@example.com', rcptTo }).input,
      ),
    );
  const res = await Promise.all([
    send(t.tenantId, ['gone@example.com', 'fine@example.com']),
    send(t.tenantId, ['someone@blocked.example']),
    send(t.tenantId, ['other-gone@example.com']),
    send(other.tenantId, ['other-gone@example.com', 'gone@example.com', 'x@blocked.example']),
    send(t.tenantId, ['fine2@example.com']),
  ]);
  expect(stats.transactions).toBe(1);
  // One statement per tenant of the batch on PostgreSQL.
  expect(stats.lookups).toBe(DIALECT === 'postgres' ? 2 : 5);
  const statuses = res.map((r) => r.items.map((i) => `${i.email}:${i.status}`));
  expect(statuses).toEqual([
    ['gone@example.com:suppressed'],
    ['someone@blocked.example:suppressed'],
    [],
    ['other-gone@example.com:suppressed'],
    [],
  ]);
  expect(res.map((r) => [r.total_accepted_recipients, r.total_rejected_recipients])).toEqual([
    [1, 1],
    [0, 1],
    [1, 0],
    [2, 1],
    [1, 0],
  ]);
});

it('a member failing in its code, in an SQL statement or in the flush of its rows fails alone', async () => {
  const { group } = counting();
  const subjects = ['m0', 'm1', 'js-error', 'm2', 'sql-error', 'm3', 'flush-error', 'm4'];
  const existing = await ctx.c.database.db.selectFrom('transmissions').selectAll().limit(1).executeTakeFirstOrThrow();
  const settled = await Promise.allSettled(
    subjects.map((s) =>
      group.runBuffered(async (trx) => {
        const r = await accept(trx, s);
        if (s === 'js-error') throw new AppError('sender_domain_not_verified', 'not verified');
        // A failing statement: on PostgreSQL it aborts the whole shared transaction.
        if (s === 'sql-error') await sql`select * from no_such_table`.execute(trx);
        // A row that breaks the primary key: only the multi-row flush at the end finds out.
        if (s === 'flush-error') await insertMany(trx, 'transmissions', [existing]);
        return r;
      }),
    ),
  );
  expect(settled.map((r) => `${subjects[settled.indexOf(r)]}:${r.status}`)).toEqual(
    subjects.map((s) => `${s}:${s.endsWith('error') ? 'rejected' : 'fulfilled'}`),
  );
  expect((settled[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'sender_domain_not_verified' });
  for (const s of subjects) expect(await stored(s), s).toEqual(s.endsWith('error') ? NONE : ONCE);
});

it.skipIf(DIALECT !== 'postgres')(
  'the batch connection terminated mid-batch (server restart): every accept stored exactly once',
  () => restartMidBatch(counting().group.runBuffered, accept, stored, 'restart'),
  30_000,
);
