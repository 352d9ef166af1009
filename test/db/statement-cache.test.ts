import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/index.ts';
import { withStatementCache } from '../../src/db/statement-cache.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The shape of the delivery outcomes' batch UPDATE: one text per row count. */
function batchUpdate(rows: number) {
  const tuples = Array.from({ length: rows }, () => '(?, ?, ?, ?, ?)').join(', ');
  return (
    'update messages set state = v.column2, attempt_count = v.column3, next_attempt_at = v.column4, ' +
    'last_response = v.column5, locked_until = null, locked_by = null ' +
    `from (values ${tuples}) as v where messages.id = v.column1 and messages.locked_by = ?`
  );
}

describe('SQLite statement cache', () => {
  it('multi-row statements of every batch size do not pile up in native memory (RSS stays flat)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-stmts-'));
    dirs.push(dir);
    // The connection as openDatabase configures it, through the cache it gives Kysely.
    const database = openDatabase({ databaseUrl: null, dataDir: dir });
    const raw = new SqliteDatabase(join(dir, 'postyard.sqlite'));
    const cache = withStatementCache(raw);
    try {
      raw.exec(`create table messages (id text primary key, state text, attempt_count integer,
        next_attempt_at text, locked_until text, locked_by text, last_response text)`);
      const run = (rows: number) => {
        const params = Array.from({ length: rows }, (_, i) => [`m${i}`, 'delivered', 1, null, '250 ok']).flat();
        cache.prepare(batchUpdate(rows)).run(...params, 'w');
      };
      for (let rows = 1; rows <= 20; rows++) run(rows);
      const before = process.memoryUsage().rss;
      for (let round = 0; round < 4; round++) for (let rows = 1; rows <= 1000; rows++) run(rows);
      const grown = (process.memoryUsage().rss - before) / 2 ** 20;
      // Kept, these 1,000 prepared statements hold ~250 MB outside the V8 heap (the cache before
      // the fix kept them all); churned through a small LRU, their memory waits for a major GC
      // and piles up; prepared for one use and dropped, they reuse the same few tens of MB.
      expect(grown).toBeLessThan(100);
      expect(cache.stats().chars).toBeLessThanOrEqual(1_000_000);
    } finally {
      raw.close();
      void database.close();
    }
  }, 240_000);

  it('keeps short statements (LRU), never keeps long ones, and stays within its text budget', () => {
    const raw = new SqliteDatabase(':memory:');
    const cache = withStatementCache(raw, { maxStatements: 50, maxChars: 2000, maxStatementChars: 200 });
    const short = (i: number) => `select ${i} as n`;
    const a = cache.prepare(short(1));
    expect(cache.prepare(short(1))).toBe(a);
    const long = `select ${'1 + '.repeat(100)}1 as n`;
    expect(cache.prepare(long)).not.toBe(cache.prepare(long));
    for (let i = 0; i < 500; i++) cache.prepare(short(i));
    const { statements, chars } = cache.stats();
    expect(statements).toBeLessThanOrEqual(50);
    expect(chars).toBeLessThanOrEqual(2000);
    // The most recently used are the ones kept.
    const recent = cache.prepare(short(499));
    expect(cache.prepare(short(499))).toBe(recent);
    raw.close();
  });
});
