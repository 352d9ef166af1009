/**
 * Fixture of the tests on resources that issue a secret once (API keys, SMTP credentials): one
 * test context and tenant for the file, a POST to the resource, and the stored row.
 */
import { afterAll, beforeAll } from 'vitest';
import type { DB } from '../../src/db/schema.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from './context.ts';

type SecretTable = 'api_keys' | 'smtp_credentials';

export interface SecretResourceFixture<T extends SecretTable> {
  readonly ctx: TestContext;
  readonly tenant: TestTenant;
  /** POST to the resource with `key` as the bearer. */
  create(key: string, body: unknown, headers?: Record<string, string>): ReturnType<typeof call>;
  /** The stored row (what a database reader would see). */
  dbRow(id: string): Promise<DB[T]>;
}

/** Registers beforeAll/afterAll for the file; read `ctx` and `tenant` inside tests only. */
export function secretResourceFixture<T extends SecretTable>(path: string, table: T): SecretResourceFixture<T> {
  let ctx: TestContext | undefined;
  let tenant: TestTenant | undefined;
  beforeAll(async () => {
    ctx = await createTestContext();
    tenant = await createTenant(ctx);
  });
  afterAll(async () => {
    await ctx?.close();
  });
  const started = () => {
    if (!ctx || !tenant) throw new Error('secretResourceFixture: used outside a test');
    return { ctx, tenant };
  };
  return {
    get ctx() {
      return started().ctx;
    },
    get tenant() {
      return started().tenant;
    },
    create: (key, body, headers = {}) => call(started().ctx.app, 'POST', path, { key, body, headers }),
    dbRow: async (id) =>
      (await started()
        .ctx.c.database.db.selectFrom(table as SecretTable)
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirstOrThrow()) as DB[T],
  };
}
