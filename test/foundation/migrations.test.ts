/**
 * Migrations on PostgreSQL when the database holds other schemas (several installations, or test
 * files running in parallel, each in its own schema): migrateToLatest must only look at its own
 * schema (search_path), never be confused or broken by what happens in the others.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, migrateToLatest, openDatabase } from '../../src/db/index.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { TEST_DATABASE_URL } from '../helpers/context.ts';

const ALL = Object.keys(migrations);

function uniq(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}

describe.runIf(TEST_DATABASE_URL)('migrateToLatest on PostgreSQL with other schemas present', () => {
  const url = TEST_DATABASE_URL as string;
  const dataDir = mkdtempSync(join(tmpdir(), 'postyard-mig-'));
  const created: string[] = [];
  let admin: pg.Client;

  async function freshSchema(prefix = 'mig'): Promise<string> {
    const schema = uniq(prefix);
    await admin.query(`CREATE SCHEMA ${schema}`);
    created.push(schema);
    return schema;
  }

  function open(schema: string): Database {
    return openDatabase({ databaseUrl: url, dataDir, pgSchema: schema, poolSize: 2 });
  }

  async function tablesOf(schema: string): Promise<string[]> {
    const { rows } = await admin.query<{ t: string }>(
      'select table_name as t from information_schema.tables where table_schema = $1',
      [schema],
    );
    return rows.map((r) => r.t);
  }

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
  });
  afterAll(async () => {
    for (const s of created) await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
    await admin.end();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("creates its own migration tables even when another schema already has Kysely's", async () => {
    const first = await freshSchema();
    const a = open(first);
    try {
      expect(await migrateToLatest(a)).toEqual(ALL);
    } finally {
      await a.close();
    }
    const second = await freshSchema();
    const b = open(second);
    try {
      expect(await migrateToLatest(b)).toEqual(ALL);
      expect(await migrateToLatest(b)).toEqual([]);
    } finally {
      await b.close();
    }
    for (const s of [first, second]) {
      expect(await tablesOf(s)).toEqual(
        expect.arrayContaining(['kysely_migration', 'kysely_migration_lock', 'tenants', 'api_keys']),
      );
    }
  });

  it('concurrent migrations of one schema apply each migration once', async () => {
    const schema = await freshSchema();
    const nodes = [open(schema), open(schema), open(schema)];
    try {
      const results = await Promise.all(nodes.map((d) => migrateToLatest(d)));
      expect(results.flat().sort()).toEqual([...ALL].sort());
    } finally {
      await Promise.all(nodes.map((d) => d.close()));
    }
  });

  it('is not broken by DDL running at the same time in another schema', async () => {
    // Another installation (or a parallel test file) altering its own tables while we migrate.
    const noise = await freshSchema('noise');
    await admin.query(`CREATE TABLE ${noise}.t (a int)`);
    let stop = false;
    let rounds = 0;
    const ddl = (async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        while (!stop) {
          await c.query(`ALTER TABLE ${noise}.t ADD COLUMN b int`);
          await c.query(`ALTER TABLE ${noise}.t DROP COLUMN b`);
          await c.query(`DROP TABLE ${noise}.t; CREATE TABLE ${noise}.t (a int)`);
          rounds++;
        }
      } finally {
        await c.end();
      }
    })();
    const failures: string[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const schema = await freshSchema();
        const d = open(schema);
        try {
          await migrateToLatest(d);
        } catch (err) {
          failures.push(String(err));
        } finally {
          await d.close();
        }
      }
    } finally {
      stop = true;
      await ddl;
    }
    expect(rounds).toBeGreaterThan(0);
    expect(failures).toEqual([]);
  });
});
