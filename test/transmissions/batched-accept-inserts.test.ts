/**
 * Accepts that only read and insert (src/db/group-commit.ts `runInserts`, what SMTP submission
 * without an Idempotency-Key uses). On PostgreSQL their batch opens no transaction: the units
 * read together on one connection (one suppression lookup for the batch) and all their rows go
 * in with one statement. SQLite keeps its shared transaction. On both, a member that fails (in
 * its code, in a read, or in the statement writing its rows) fails alone and every other member
 * is stored exactly once; rows past one statement's parameter limit still go in whole; on
 * PostgreSQL the batch's connection being terminated loses and duplicates nothing.
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { insertMany } from '../../src/db/batch.ts';
import { GroupCommit } from '../../src/db/group-commit.ts';
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

function input(subject: string, rcptTo?: string[]) {
  return prepareSubmission(Buffer.from(message({ subject })), {
    mailFrom: 'shop@example.com',
    rcptTo: rcptTo ?? [`${subject.replace(/\W/g, '')}@example.com`, 'second@example.com'],
  }).input;
}

/** A group commit whose connections and transactions count what they run. */
function counting() {
  const stats = { transactions: 0, connections: 0, inserts: 0, lookups: 0 };
  // biome-ignore lint/suspicious/noExplicitAny: a proxy over Kysely's instances and connections
  const counted = (k: any): any =>
    new Proxy(k, {
      get(target, prop) {
        if (prop === 'startTransaction') {
          return () => ({
            execute: async () => {
              stats.transactions++;
              return counted(await target.startTransaction().execute());
            },
          });
        }
        if (prop === 'connection') {
          return () => ({
            execute: (cb: (conn: unknown) => Promise<unknown>) =>
              target.connection().execute((conn: unknown) => {
                stats.connections++;
                return cb(counted(conn));
              }),
          });
        }
        const v = Reflect.get(target, prop, target);
        if (prop === 'executeQuery') {
          return (q: { sql: string }) => {
            if (/^\s*(insert|with)/i.test(q.sql)) stats.inserts++;
            if (/from "suppressions"/.test(q.sql)) stats.lookups++;
            return (v as (q: unknown) => unknown).call(target, q);
          };
        }
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  const database = ctx.c.database;
  return { group: new GroupCommit({ ...database, db: counted(database.db) as Kysely<DB> }), stats };
}

/** Transmissions, messages, events and outbox rows stored for `subject`. */
async function stored(subject: string) {
  const db = ctx.c.database.db;
  const ts = (
    await db.selectFrom('transmissions').select(['id', 'content']).where('tenant_id', '=', t.tenantId).execute()
  )
    .filter((r) => (JSON.parse(r.content) as { subject: string }).subject === subject)
    .map((r) => r.id);
  if (ts.length === 0) return { transmissions: 0, messages: 0, events: 0, outbox: 0 };
  const n = async (q: Promise<{ n: unknown } | undefined>) => Number((await q)?.n ?? 0);
  const count = (table: 'messages' | 'events') =>
    n(
      db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll().as('n'))
        .where('transmission_id', 'in', ts)
        .executeTakeFirst(),
    );
  return {
    transmissions: ts.length,
    messages: await count('messages'),
    events: await count('events'),
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

const accept = (trx: Transaction<DB>, subject: string, rcptTo?: string[]) =>
  ctx.c.transmissions.accept(trx, t.tenantId, input(subject, rcptTo));

it('on PostgreSQL a batch of accepts is one lookup and one statement, without BEGIN or COMMIT', async () => {
  const { group, stats } = counting();
  const subjects = Array.from({ length: 12 }, (_, i) => `inserts ${i}`);
  const res = await Promise.all(subjects.map((s) => group.runInserts((trx) => accept(trx, s))));
  expect(new Set(res.map((r) => r.transmission_id)).size).toBe(12);
  if (PG) {
    expect(stats).toEqual({ transactions: 0, connections: 1, inserts: 1, lookups: 1 });
  } else {
    // SQLite: the shared transaction, one INSERT per table, a lookup per accept (no round trips).
    expect(stats).toEqual({ transactions: 1, connections: 0, inserts: 4, lookups: 12 });
  }
  for (const s of subjects) expect(await stored(s), s).toEqual(ONCE);
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
  // PostgreSQL: too many parameters for one statement, so a transaction holds the INSERTs.
  expect(stats.transactions).toBe(1);
  expect(await stored('big one')).toEqual({ transmissions: 1, messages: 2000, events: 2000, outbox: 2000 });
  expect(await stored('small one')).toEqual(ONCE);
});

it.skipIf(!PG)(
  'the batch connection terminated mid-batch (server restart): every accept stored exactly once',
  async () => {
    const { group } = counting();
    const subjects = Array.from({ length: 10 }, (_, i) => `inserts restart ${i}`);
    let terminated = 0;
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL as string });
    await admin.connect();
    try {
      const runs = subjects.map((s, i) =>
        group.runInserts(async (trx) => {
          // A read that waits in the database, so the test can kill the batch's backend.
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
