/**
 * Accepts that only read and insert (src/db/group-commit.ts `runInserts`, what SMTP submission
 * without an Idempotency-Key uses). On PostgreSQL their batch opens no transaction: the units
 * read together on one connection (one suppression lookup for the batch) and all their rows go
 * in with one statement. SQLite keeps its shared transaction. On both, a member that fails (in
 * its code, in a read, or in the statement writing its rows) fails alone and every other member
 * is stored exactly once; rows past one statement's parameter limit still go in whole; on
 * PostgreSQL the batch's connection being terminated loses and duplicates nothing.
 */
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { insertMany } from '../../src/db/batch.ts';
import type { DB } from '../../src/db/schema.ts';
import { AppError } from '../../src/lib/errors.ts';
import { createTenant, createTestContext, DIALECT, type TestContext, type TestTenant } from '../helpers/context.ts';
import { countingGroupCommit, input, NONE, ONCE, restartMidBatch, storedRows } from './batch-harness.ts';

const PG = DIALECT === 'postgres';
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
const accept = (trx: Transaction<DB>, subject: string, rcptTo?: string[]) =>
  ctx.c.transmissions.accept(trx, t.tenantId, input(subject, rcptTo));

it('on PostgreSQL a batch of accepts is one statement (suppressions checked inside it), without BEGIN or COMMIT', async () => {
  const { group, stats } = counting();
  const subjects = Array.from({ length: 12 }, (_, i) => `inserts ${i}`);
  const res = await Promise.all(subjects.map((s) => group.runInserts((trx) => accept(trx, s))));
  expect(new Set(res.map((r) => r.transmission_id)).size).toBe(12);
  if (PG) {
    // No separate lookup: the INSERT statement checks the suppressions (src/db/coalesce.ts Guard).
    expect(stats).toEqual({ transactions: 0, connections: 1, inserts: 1, lookups: 0 });
  } else {
    // SQLite: the shared transaction, one INSERT per table, a lookup per accept (no round trips).
    expect(stats).toEqual({ transactions: 1, connections: 0, inserts: 4, lookups: 12 });
  }
  for (const s of subjects) expect(await stored(s), s).toEqual(ONCE);
});

it('a suppressed recipient in a batch with unsuppressed ones is stored and reported as suppressed, the others as accepted', async () => {
  const other = await createTenant(ctx);
  const suppress = (tenantId: string, identifier: string, type: 'email' | 'domain', scope?: 'marketing') =>
    ctx.c.suppressions.upsertPrepared(
      tenantId,
      ctx.c.suppressions.prepareItems([{ identifier, type, reason_category: 'manual', ...(scope ? { scope } : {}) }]),
      ctx.c.database.db,
    );
  await suppress(t.tenantId, 'mixed-gone@example.com', 'email');
  await suppress(t.tenantId, 'mixed-blocked.example', 'domain');
  // Marketing only: a transactional submission still goes to it (found by the check, left out by scope).
  await suppress(t.tenantId, 'promo-only@example.com', 'email', 'marketing');
  await suppress(other.tenantId, 'mixed-fine@example.com', 'email');
  const { group, stats } = counting();
  const batch: [string, string[]][] = [
    ['mixed a', ['mixed-gone@example.com', 'mixed-fine@example.com']],
    ['mixed b', ['x@mixed-blocked.example']],
    ['mixed c', ['mixed-fine2@example.com', 'promo-only@example.com']],
    ['mixed d', ['mixed-fine3@example.com']],
  ];
  const res = await Promise.all(batch.map(([s, rcpt]) => group.runInserts((trx) => accept(trx, s, rcpt))));
  expect(res.map((r) => r.items.map((i) => `${i.email}:${i.status}:${i.reason}`))).toEqual([
    ['mixed-gone@example.com:suppressed:manual'],
    ['x@mixed-blocked.example:suppressed:manual'],
    [],
    [],
  ]);
  expect(res.map((r) => [r.total_accepted_recipients, r.total_rejected_recipients])).toEqual([
    [1, 1],
    [0, 1],
    [2, 0],
    [1, 0],
  ]);
  if (PG) {
    // The first statement found suppression rows and inserted nothing; the units ran again with
    // them and the second statement stored the batch: no separate lookup, no transaction.
    expect(stats).toEqual({ transactions: 0, connections: 1, inserts: 2, lookups: 0 });
  }
  const db = ctx.c.database.db;
  for (const [i, [subject, rcpt]] of batch.entries()) {
    const id = (res[i] as { transmission_id: string }).transmission_id;
    const tx = await db.selectFrom('transmissions').selectAll().where('id', '=', id).execute();
    expect(
      tx.map((x) => [x.total_accepted, x.total_rejected]),
      subject,
    ).toEqual([[res[i]?.total_accepted_recipients, res[i]?.total_rejected_recipients]]);
    const msgs = await db
      .selectFrom('messages')
      .select(['recipient', 'state'])
      .where('transmission_id', '=', id)
      .execute();
    const events = await db
      .selectFrom('events')
      .select(['recipient', 'type'])
      .where('transmission_id', '=', id)
      .execute();
    const suppressed = new Set(res[i]?.items.filter((x) => x.status === 'suppressed').map((x) => x.email));
    expect(msgs.map((m) => `${m.recipient}:${m.state}`).sort(), subject).toEqual(
      rcpt.map((r) => `${r}:${suppressed.has(r) ? 'suppressed' : 'queued'}`).sort(),
    );
    expect(events.map((e) => `${e.recipient}:${e.type}`).sort(), subject).toEqual(
      rcpt.map((r) => `${r}:${suppressed.has(r) ? 'message.suppressed' : 'message.accepted'}`).sort(),
    );
  }
});

it('a member failing in its code, in a read or in the statement writing its rows fails alone', async () => {
  const { group } = counting();
  const subjects = ['i0', 'i1', 'js-error', 'i2', 'sql-error', 'i3', 'flush-error', 'i4'];
  const existing = await ctx.c.database.db.selectFrom('transmissions').selectAll().limit(1).executeTakeFirstOrThrow();
  const settled = await Promise.allSettled(
    subjects.map((s) =>
      group.runInserts(async (trx) => {
        const r = await accept(trx, s);
        if (s === 'js-error') throw new AppError('sender_domain_not_verified', 'not verified');
        if (s === 'sql-error') await sql`select * from no_such_table`.execute(trx);
        // A row that breaks the primary key: only the statement writing the batch finds out.
        if (s === 'flush-error') await insertMany(trx, 'transmissions', [existing]);
        return r;
      }),
    ),
  );
  expect(settled.map((r, i) => `${subjects[i]}:${r.status}`)).toEqual(
    subjects.map((s) => `${s}:${s.endsWith('error') ? 'rejected' : 'fulfilled'}`),
  );
  expect((settled[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'sender_domain_not_verified' });
  for (const s of subjects) expect(await stored(s), s).toEqual(s.endsWith('error') ? NONE : ONCE);
});

it('rows past one statement (2,000 recipients) go in whole, next to a small accept', async () => {
  const { group, stats } = counting();
  const many = Array.from({ length: 2000 }, (_, i) => `r${i}@example.com`);
  const [big, small] = await Promise.all([
    group.runInserts((trx) => accept(trx, 'big one', many)),
    group.runInserts((trx) => accept(trx, 'small one')),
  ]);
  expect(big.total_accepted_recipients).toBe(2000);
  expect(small.total_accepted_recipients).toBe(2);
  // PostgreSQL: still one statement (a JSON parameter per table, no parameter per cell), so no
  // transaction; the big one's suppressions are looked up first (not guessed: see
  // suppressions.repo.ts NOTHING_SUPPRESSED), the small one's checked in that statement.
  // SQLite: the shared transaction.
  if (PG) expect(stats).toMatchObject({ transactions: 0, inserts: 1, lookups: 1 });
  else expect(stats.transactions).toBe(1);
  expect(await stored('big one')).toEqual({ transmissions: 1, messages: 2000, events: 2000, outbox: 2000 });
  expect(await stored('small one')).toEqual(ONCE);
});

it('rows JSON cannot carry to PostgreSQL unchanged (a lone UTF-16 surrogate) are stored as before, next to others', async () => {
  const { group } = counting();
  const odd = input('odd surrogate');
  odd.metadata = { note: 'a\ud800b' };
  odd.recipients = odd.recipients.map((r) => ({ ...r, name: 'Ann \ud800' }));
  const [a, b] = await Promise.all([
    group.runInserts((trx) => ctx.c.transmissions.accept(trx, t.tenantId, odd)),
    group.runInserts((trx) => accept(trx, 'plain neighbour')),
  ]);
  expect(a.total_accepted_recipients).toBe(2);
  expect(b.total_accepted_recipients).toBe(2);
  expect(await stored('odd surrogate')).toEqual(ONCE);
  expect(await stored('plain neighbour')).toEqual(ONCE);
  const tx = await ctx.c.database.db
    .selectFrom('transmissions')
    .select('metadata')
    .where('id', '=', a.transmission_id)
    .executeTakeFirstOrThrow();
  // Serialized JSON keeps the surrogate as an escape; a text column gets it as UTF-8 from the
  // driver: U+FFFD from pg, as the VALUES form always stored it (better-sqlite3 writes three).
  expect(JSON.parse(tx.metadata)).toEqual({ note: 'a\ud800b' });
  const names = await ctx.c.database.db
    .selectFrom('messages')
    .select('recipient_name')
    .where('transmission_id', '=', a.transmission_id)
    .execute();
  for (const n of names) expect(n.recipient_name).toBe(PG ? 'Ann \ufffd' : 'Ann \ufffd\ufffd\ufffd');
});

it.skipIf(!PG)(
  'the batch connection terminated mid-batch (server restart): every accept stored exactly once',
  () => restartMidBatch(counting().group.runInserts, accept, stored, 'inserts restart'),
  30_000,
);
