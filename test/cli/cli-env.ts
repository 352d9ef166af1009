/** The environment that points a `postyard` child at a test context's database (SQLite or PostgreSQL schema). */
import { TEST_DATABASE_URL, type TestContext } from '../helpers/context.ts';

export function cliEnvFor(ctx: TestContext, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = { POSTYARD_DATA_DIR: ctx.dataDir, ...extra };
  if (TEST_DATABASE_URL && ctx.pgSchema) {
    const url = new URL(TEST_DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${ctx.pgSchema}`);
    env.DATABASE_URL = url.toString();
  }
  return env;
}
