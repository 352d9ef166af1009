import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from './index.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const size = (f: string) => {
  try {
    return statSync(f).size;
  } catch {
    return 0;
  }
};

describe('SQLite checkpoints on a background thread', () => {
  it('the main connection never checkpoints, yet committed pages reach the database file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-ckpt-'));
    dirs.push(dir);
    const file = join(dir, 'postyard.sqlite');
    const database = openDatabase({ databaseUrl: null, dataDir: dir });
    try {
      const { rows } = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(database.db);
      expect(rows[0]?.wal_autocheckpoint).toBe(0);
      await sql`create table blobs (id integer primary key, body text not null)`.execute(database.db);
      const before = size(file);
      const body = 'x'.repeat(8000);
      // 600 commits of 8 KB: about 1,800 WAL pages, past the point where SQLite would have
      // checkpointed inside a COMMIT on its own.
      for (let i = 0; i < 600; i++) await sql`insert into blobs (body) values (${body})`.execute(database.db);
      const deadline = Date.now() + 20_000;
      while (size(file) < before + 4_000_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      // Only a checkpoint writes into the database file in WAL mode: the thread did it.
      expect(size(file)).toBeGreaterThan(before + 4_000_000);
    } finally {
      await database.close();
    }
    // Everything committed is there for a fresh connection, and closing left no WAL behind.
    const check = new SqliteDatabase(file, { readonly: true });
    expect((check.prepare('select count(*) as n from blobs').get() as { n: number }).n).toBe(600);
    check.close();
    expect(size(`${file}-wal`)).toBe(0);
  });
});
