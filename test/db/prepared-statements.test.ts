/**
 * PostgreSQL: the accepts' one-statement batch runs as a named prepared statement
 * (src/db/prepared.ts), parsed once per connection instead of once per batch; other statements
 * stay unnamed. Checked in the server's own view of the session (pg_prepared_statements).
 */
import { sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneStatement } from '../../src/db/batch.ts';
import { GroupCommit } from '../../src/db/group-commit.ts';
import { type Database, openDatabase } from '../../src/db/index.ts';
import { namePreparedStatements, PREPARED, statementName } from '../../src/db/prepared.ts';
import type { DB } from '../../src/db/schema.ts';
import {
  createTenant,
  createTestContext,
  DIALECT,
  TEST_DATABASE_URL,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { input, ONCE, storedRows } from '../transmissions/batch-harness.ts';

const PG = DIALECT === 'postgres';

interface Prepared {
  name: string;
  statement: string;
  runs: number;
}

const PREPARED_SQL = `select name, statement, (generic_plans + custom_plans)::int as runs
  from pg_prepared_statements order by name`;

describe.skipIf(!PG)('named prepared statements on PostgreSQL', () => {
  it('a marked text runs as one named statement per connection, under its hash name; others stay unnamed', async () => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
    await client.connect();
    try {
      namePreparedStatements(client);
      const marked = `${PREPARED}select $1::int + 1 as n`;
      for (const v of [1, 2, 3]) expect((await client.query(marked, [v])).rows).toEqual([{ n: v + 1 }]);
      expect((await client.query('select $1::int * 2 as n', [4])).rows).toEqual([{ n: 8 }]);
      // A wrong value is the statement's error, and the statement stays usable.
      await expect(client.query(marked, ['not a number'])).rejects.toThrow(/invalid input syntax/);
      expect((await client.query(marked, [9])).rows).toEqual([{ n: 10 }]);
      const other = `${PREPARED}select $1::text as s`;
      await client.query(other, ['x']);
      const rows = (await client.query<Prepared>(PREPARED_SQL)).rows;
      expect(rows).toEqual(
        [
          { name: statementName(marked), statement: marked, runs: 4 },
          { name: statementName(other), statement: other, runs: 1 },
        ].sort((a, b) => a.name.localeCompare(b.name)),
      );
      expect(statementName(marked)).toMatch(/^py_[0-9a-f]{24}$/);
    } finally {
      await client.end();
    }
  });

  it('a statement the server lost (DEALLOCATE ALL, as poolers send) is prepared again, not failed', async () => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
    await client.connect();
    try {
      namePreparedStatements(client);
      const marked = `${PREPARED}select $1::int * 3 as n`;
      expect((await client.query(marked, [2])).rows).toEqual([{ n: 6 }]);
      await client.query('deallocate all');
      expect((await client.query(marked, [3])).rows).toEqual([{ n: 9 }]);
      expect((await client.query(marked, [4])).rows).toEqual([{ n: 12 }]);
      const rows = (await client.query<Prepared>(PREPARED_SQL)).rows;
      expect(rows).toEqual([{ name: statementName(marked), statement: marked, runs: 2 }]);
    } finally {
      await client.end();
    }
  });

  describe('accepts through the group commit', () => {
    let ctx: TestContext;
    let t: TestTenant;
    // One connection, so the server's per-session view shows every batch's statement.
    let single: Database;

    beforeAll(async () => {
      ctx = await createTestContext();
      t = await createTenant(ctx);
      single = openDatabase({
        databaseUrl: TEST_DATABASE_URL,
        dataDir: ctx.dataDir,
        poolSize: 1,
        pgSchema: ctx.pgSchema ?? '',
      });
    });
    afterAll(async () => {
      await single?.close();
      await ctx?.close();
    });

    it('every batch of runInserts accepts reuses one prepared statement, and each accept is stored once', async () => {
      const group = new GroupCommit(single);
      const accept = (trx: Transaction<DB>, subject: string) =>
        ctx.c.transmissions.accept(trx, t.tenantId, input(subject));
      const subjects: string[] = [];
      for (let batch = 0; batch < 7; batch++) {
        const these = Array.from({ length: 3 }, (_, i) => `prepared ${batch}-${i}`);
        subjects.push(...these);
        await Promise.all(these.map((s) => group.runInserts((trx) => accept(trx, s))));
      }
      const rows = await single.db
        .connection()
        .execute(async (conn) => (await sql<Prepared>`${sql.raw(PREPARED_SQL)}`.execute(conn)).rows);
      expect(rows).toHaveLength(1);
      expect(rows[0]?.statement.startsWith(`${PREPARED}with g0 as materialized`)).toBe(true);
      expect(rows[0]?.name).toBe(statementName(rows[0]?.statement ?? ''));
      expect(rows[0]?.runs).toBe(7);
      for (const s of subjects) expect(await storedRows(ctx, t.tenantId, s), s).toEqual(ONCE);
    });

    it('a batch with more tenants than MAX_PREPARED_CHECKS (one check each) is not prepared', async () => {
      const tenants = await Promise.all(Array.from({ length: 5 }, () => createTenant(ctx)));
      const checks = (n: number) =>
        Array.from({ length: n }, (_, i) => ({
          sql: (first: number) => `select $${first}::text as t${i}`,
          params: ['x'],
        }));
      const groups = [{ table: 'event_tags', rows: [{ tenant_id: tenants[0]?.tenantId, tag: 'a', event_id: 'e' }] }];
      const four = await oneStatement(single.db, groups, undefined, checks(4));
      const five = await oneStatement(single.db, groups, undefined, checks(5));
      expect(four?.sql.startsWith(PREPARED)).toBe(true);
      expect(five?.sql.startsWith(PREPARED)).toBe(false);
      expect(five?.sql.startsWith('with g0 as materialized')).toBe(true);
    });
  });
});

it.skipIf(PG)('SQLite runs no PostgreSQL statement text: oneStatement is PostgreSQL only', async () => {
  const ctx = await createTestContext();
  try {
    expect(await oneStatement(ctx.c.database.db, [{ table: 'event_tags', rows: [{ tag: 'a' }] }])).toBeNull();
  } finally {
    await ctx.close();
  }
});
