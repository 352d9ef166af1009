import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createTestContext, DIALECT, type TestContext } from '../helpers/context.ts';

/**
 * POSTYARD_SQLITE_SYNCHRONOUS: normal (default) or full (a WAL flush at every commit);
 * POSTYARD_SQLITE_CACHE_MB: the main connection's page cache (default 64 MiB, not SQLite's 2 MB).
 */
describe.runIf(DIALECT === 'sqlite')('SQLite settings', () => {
  let ctx: TestContext | undefined;
  afterEach(async () => {
    await ctx?.close();
    ctx = undefined;
  });

  async function synchronous(c: TestContext): Promise<number> {
    const { rows } = await sql<{ synchronous: number }>`pragma synchronous`.execute(c.c.database.db);
    return Number(rows[0]?.synchronous);
  }

  it('is NORMAL (1) by default', async () => {
    ctx = await createTestContext();
    expect(await synchronous(ctx)).toBe(1);
  });

  it('is FULL (2) with POSTYARD_SQLITE_SYNCHRONOUS=full', async () => {
    ctx = await createTestContext({ env: { POSTYARD_SQLITE_SYNCHRONOUS: 'full' } });
    expect(await synchronous(ctx)).toBe(2);
  });

  it('refuses any other value at start, naming the variable', () => {
    expect(() => loadConfig({ POSTYARD_SQLITE_SYNCHRONOUS: 'off' })).toThrow(/POSTYARD_SQLITE_SYNCHRONOUS/);
  });

  async function cacheKib(c: TestContext): Promise<number> {
    const { rows } = await sql<{ cache_size: number }>`pragma cache_size`.execute(c.c.database.db);
    return -Number(rows[0]?.cache_size);
  }

  it('gives the main connection a 64 MiB page cache by default', async () => {
    ctx = await createTestContext();
    expect(await cacheKib(ctx)).toBe(64 * 1024);
  });

  it('takes the page cache size from POSTYARD_SQLITE_CACHE_MB and refuses a value out of range', async () => {
    ctx = await createTestContext({ env: { POSTYARD_SQLITE_CACHE_MB: '256' } });
    expect(await cacheKib(ctx)).toBe(256 * 1024);
    expect(() => loadConfig({ POSTYARD_SQLITE_CACHE_MB: '1' })).toThrow(/POSTYARD_SQLITE_CACHE_MB/);
  });
});
