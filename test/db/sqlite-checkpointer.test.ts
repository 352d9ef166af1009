import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/index.ts';
import { startCheckpointer } from '../../src/db/sqlite-checkpointer.ts';

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

  it('under back-to-back write transactions the WAL stays bounded instead of growing until the writes stop', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-ckpt-'));
    dirs.push(dir);
    const file = join(dir, 'postyard.sqlite');
    const database = openDatabase({ databaseUrl: null, dataDir: dir });
    let largest = 0;
    const rows = 120_000;
    try {
      await sql`create table blobs (id integer primary key, body text not null)`.execute(database.db);
      await sql`create index blobs_body on blobs (body)`.execute(database.db);
      const body = 'x'.repeat(2000);
      // (A loaded 2-core machine needs far more than vitest's 30 s for this: see the timeout.)
      // A writer that is never idle for long (the accept path, delivery outcomes and webhook
      // bookkeeping under a steady load): transactions back to back, one event-loop turn apart.
      // About 1 GB of WAL frames in all; before the fix the WAL held every one of them, since a
      // PASSIVE checkpoint never lets the writer start it over while commits keep coming.
      for (let n = 0; n < rows; ) {
        await database.db.transaction().execute(async (trx) => {
          for (let i = 0; i < 20; i++, n++) await sql`insert into blobs (body) values (${body + n})`.execute(trx);
        });
        await new Promise((r) => setImmediate(r));
        largest = Math.max(largest, size(`${file}-wal`));
      }
    } finally {
      await database.close();
    }
    // Restarts begin at 16 MB (4,096 pages), the main connection forces one past 32 MB (or a
    // 64 MB file). This writer outruns any disk (~100 MB/s of WAL), so how far past that the WAL
    // gets depends on how fast checkpoints are absorbed: 65-260 MB on a loaded 2-core machine.
    expect(largest).toBeLessThan(360 * 2 ** 20);
    const check = new SqliteDatabase(file, { readonly: true });
    expect((check.prepare('select count(*) as n from blobs').get() as { n: number }).n).toBe(rows);
    expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
    check.close();
  }, 240_000);

  it('transactions that read before they write never fail with SQLITE_BUSY while the thread starts the WAL over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-ckpt-'));
    dirs.push(dir);
    const database = openDatabase({ databaseUrl: null, dataDir: dir });
    let ok = 0;
    const failures: string[] = [];
    try {
      await sql`create table blobs (id integer primary key, body text not null)`.execute(database.db);
      const body = 'x'.repeat(2000);
      // The accept path's shape: look something up, then insert. About 400 MB of WAL in all, so
      // the thread runs a RESTART checkpoint (holding the write lock) many times meanwhile.
      for (let n = 0; n < 2500; n++) {
        try {
          await database.db.transaction().execute(async (trx) => {
            await sql`select count(*) as n from blobs where id < 10`.execute(trx);
            for (let i = 0; i < 20; i++) await sql`insert into blobs (body) values (${body})`.execute(trx);
          });
          ok++;
        } catch (err) {
          failures.push(String(err));
        }
        // A millisecond apart: the thread finds the write lock free between transactions.
        await new Promise((r) => setTimeout(r, 1));
      }
    } finally {
      await database.close();
    }
    expect(failures.slice(0, 3)).toEqual([]);
    expect(ok).toBe(2500);
  }, 240_000);
  it('a RESTART that found the writer busy is tried again within milliseconds, not an interval later', async () => {
    // A busy writer leaves short gaps between transactions. Before, the thread tried its RESTART
    // once per interval and, finding the writer busy, waited a whole interval again; the WAL then
    // grew to the fallback's threshold and the main connection restarted it itself, copying and
    // syncing on the event loop (docs/benchmarks.md "Session 13"). Here the thread runs every
    // 3 s; the writer holds the write lock across that round and lets go 0.5 s later.
    const dir = mkdtempSync(join(tmpdir(), 'postyard-ckpt-'));
    dirs.push(dir);
    const file = join(dir, 'postyard.sqlite');
    const raw = new SqliteDatabase(file);
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.pragma('busy_timeout = 5000');
    const checkpointer = startCheckpointer(raw, file, { intervalMs: 3000, restartFrames: 64 });
    try {
      raw.exec('create table blobs (id integer primary key, body text not null)');
      const insert = raw.prepare('insert into blobs (body) values (?)');
      // One transaction of ~100 pages: past restartFrames, short of the main connection's
      // fallback (twice that).
      raw.transaction(() => {
        for (let i = 0; i < 100; i++) insert.run('z'.repeat(3000));
      })();
      raw.exec('begin immediate');
      insert.run('held');
      await new Promise((r) => setTimeout(r, 3500));
      raw.exec('commit');
      // Before: the next round came 3 s after the first, 2.5 s from here.
      const deadline = Date.now() + 2000;
      while (checkpointer.stats().threadRestarts === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(checkpointer.stats()).toMatchObject({ threadRestarts: 1, mainThreadRestarts: 0 });
    } finally {
      await checkpointer.stop();
      raw.close();
    }
  }, 60_000);
});
