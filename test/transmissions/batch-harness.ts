/**
 * What the batched-accept tests share (batched-accept.test.ts: runBuffered, a shared transaction;
 * batched-accept-inserts.test.ts: runInserts, no transaction on PostgreSQL): a submission to
 * accept, a group commit that counts what it runs, the rows stored per subject, and the
 * server-restart case (the batch's backend terminated mid-batch).
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { expect } from 'vitest';
import { GroupCommit } from '../../src/db/group-commit.ts';
import type { Database } from '../../src/db/index.ts';
import type { DB } from '../../src/db/schema.ts';
import { prepareSubmission } from '../../src/smtp/submission.ts';
import { TEST_DATABASE_URL, type TestContext } from '../helpers/context.ts';
import { message } from '../smtp/helpers.ts';

export function input(subject: string, rcptTo?: string[]) {
  return prepareSubmission(Buffer.from(message({ subject })), {
    mailFrom: 'shop@example.com',
    rcptTo: rcptTo ?? [`${subject.replace(/\W/g, '')}@example.com`, 'second@example.com'],
  }).input;
}

/** A group commit whose connections and transactions count what they run. */
export function countingGroupCommit(database: Database) {
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
            // A leading comment: src/db/prepared.ts marks the batch statement for preparing.
            if (/^\s*(\/\*[^*]*\*\/\s*)?(insert|with)/i.test(q.sql)) stats.inserts++;
            if (/from "suppressions"/.test(q.sql)) stats.lookups++;
            return (v as (q: unknown) => unknown).call(target, q);
          };
        }
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  return { group: new GroupCommit({ ...database, db: counted(database.db) as Kysely<DB> }), stats };
}

/** Transmissions, messages, events and outbox rows stored for `subject`. */
export async function storedRows(ctx: TestContext, tenantId: string, subject: string) {
  const db = ctx.c.database.db;
  const ts = (
    await db.selectFrom('transmissions').select(['id', 'content']).where('tenant_id', '=', tenantId).execute()
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
export const ONCE = { transmissions: 1, messages: 2, events: 2, outbox: 2 };
export const NONE = { transmissions: 0, messages: 0, events: 0, outbox: 0 };

/**
 * PostgreSQL: ten accepts through `run`; the fourth waits in the database until the test
 * terminates the batch's backend (what a server restart does to it). Every accept must still be
 * answered and stored exactly once.
 */
export async function restartMidBatch(
  run: <T>(work: (trx: Transaction<DB>) => Promise<T>) => Promise<T>,
  accept: (trx: Transaction<DB>, subject: string) => Promise<unknown>,
  stored: (subject: string) => Promise<unknown>,
  prefix: string,
): Promise<void> {
  const subjects = Array.from({ length: 10 }, (_, i) => `${prefix} ${i}`);
  let terminated = 0;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL as string });
  await admin.connect();
  try {
    const runs = subjects.map((s, i) =>
      run(async (trx) => {
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
}
