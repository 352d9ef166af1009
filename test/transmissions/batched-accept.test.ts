/**
 * Batched accepts (issue 19, src/db/group-commit.ts `runBuffered`): concurrent accepts share one
 * transaction and their rows go in with one multi-row INSERT per table, on SQLite and PostgreSQL.
 * A member that fails (in its own code, in an SQL statement that aborts a PostgreSQL transaction,
 * or in the multi-row flush of its rows) fails alone; every other member is stored exactly once.
 * On PostgreSQL, the batch's connection being terminated (what a server restart does to it) loses
 * and duplicates nothing.
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GroupCommit } from '../../src/db/group-commit.ts';
import { insertMany } from '../../src/db/batch.ts';
import type { DB } from '../../src/db/schema.ts';
import { AppError } from '../../src/lib/errors.ts';
import { prepareSubmission } from '../../src/smtp/submission.ts';
import {
  createTenant,
  createTestContext,
  DIALECT,
  TEST_DATABASE_URL,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { message } from '../smtp/helpers.ts';

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
    rcptTo: [`${subject.replace(/\W/g, '')}@example.com`, 'second@example.com'],
  }).input;
}

/** A group commit whose transactions count their INSERT statements. */
function counting() {
  const stats = { transactions: 0, inserts: 0, lookups: 0 };
  const database = ctx.c.database;
  const db = new Proxy(database.db, {
    get(target, prop) {
      if (prop === 'startTransaction') {
        return () => ({
          execute: async () => {
            stats.transactions++;
            const trx = await target.startTransaction().execute();
            return new Proxy(trx, {
              get(tt, p) {
                const v = Reflect.get(tt, p, tt);
                if (p === 'executeQuery') {
                  return (q: { sql: string }) => {
                    // A PostgreSQL batch writes all its tables in one `with ... insert` statement.
                    if (/^\s*(insert|with)/i.test(q.sql)) stats.inserts++;
                    if (/from "suppressions"/.test(q.sql)) stats.lookups++;
                    return (v as (q: unknown) => unknown).call(tt, q);
                  };
                }
                return typeof v === 'function' ? v.bind(tt) : v;
              },
            });
          },
        });
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  }) as Kysely<DB>;
  return { group: new GroupCommit({ ...database, db }), stats };
}

/** Transmissions, messages and events stored for `subject` (each must be 1, 2, 2 exactly once). */
async function stored(subject: string) {
  const db = ctx.c.database.db;
  const ts = (
    await db.selectFrom('transmissions').select(['id', 'content']).where('tenant_id', '=', t.tenantId).execute()
  )
    .filter((r) => (JSON.parse(r.content) as { subject: string }).subject === subject)
    .map((r) => r.id);
  if (ts.length === 0) return { transmissions: 0, messages: 0, events: 0, outbox: 0 };
  const n = async (q: Promise<{ n: unknown } | undefined>) => Number((await q)?.n ?? 0);
  return {
    transmissions: ts.length,
    messages: await n(
      db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('transmission_id', 'in', ts)
        .executeTakeFirst(),
    ),
    events: await n(
      db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('transmission_id', 'in', ts)
        .executeTakeFirst(),
    ),
    outbox: await n(
      db
        .selectFrom('webhook_outbox')
        .innerJoin('events', 'events.id', 'webhook_outbox.event_id')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('events.transmission_id', 'in', ts)
        .executeTakeFirst(),
    ),
  };
}
const ONCE = { transmissions: 1, messages: 2, events: 2, outbox: 2 };
const NONE = { transmissions: 0, messages: 0, events: 0, outbox: 0 };

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
  async () => {
    const { group } = counting();
    const subjects = Array.from({ length: 10 }, (_, i) => `restart ${i}`);
    let terminated = 0;
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL as string });
    await admin.connect();
    try {
      const runs = subjects.map((s, i) =>
        group.runBuffered(async (trx) => {
          // The fourth member waits in the database, so the test can kill the batch's backend.
          if (i === 3 && terminated === 0) await sql`select pg_sleep(2)`.execute(trx);
          return accept(trx, s);
        }),
      );
      for (let tries = 0; tries < 100 && terminated === 0; tries++) {
        await new Promise((r) => setTimeout(r, 50));
        const r = await admin.query(
          `select pg_terminate_backend(pid) as ok from pg_stat_activity where query like 'select pg_sleep(2)%' and pid <> pg_backend_pid()`,
        );
        terminated = r.rowCount ?? 0;
      }
      expect(terminated).toBe(1);
      const settled = await Promise.allSettled(runs);
      expect(settled.map((r) => r.status)).toEqual(subjects.map(() => 'fulfilled'));
      for (const s of subjects) expect(await stored(s), s).toEqual(ONCE);
    } finally {
      await admin.end();
    }
  },
  30_000,
);
