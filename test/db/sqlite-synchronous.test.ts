import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createTestContext, DIALECT, type TestContext } from '../helpers/context.ts';

/** POSTYARD_SQLITE_SYNCHRONOUS: normal (default) or full (a WAL flush at every commit). */
describe.runIf(DIALECT === 'sqlite')('SQLite synchronous setting', () => {
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
});
