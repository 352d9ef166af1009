import type { Insertable } from 'kysely';
import type { Executor } from './executor.ts';
import type { DB } from './schema.ts';

/** SQLite allows 32,766 bound parameters per statement; PostgreSQL 65,535. Stay under both. */
const MAX_PARAMS = 30_000;

/** Multi-row INSERT split into chunks that respect the bound-parameter limits. */
export async function insertMany<T extends keyof DB & string>(
  db: Executor,
  table: T,
  rows: Insertable<DB[T]>[],
): Promise<void> {
  if (rows.length === 0) return;
  const cols = Object.keys(rows[0] as object).length || 1;
  const chunk = Math.max(1, Math.floor(MAX_PARAMS / cols));
  for (let i = 0; i < rows.length; i += chunk) {
    // biome-ignore lint/suspicious/noExplicitAny: Kysely's generic insert typing cannot follow T here
    await (db as any)
      .insertInto(table)
      .values(rows.slice(i, i + chunk))
      .execute();
  }
}
