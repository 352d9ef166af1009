import { nameTaken } from '../lib/errors.ts';

/**
 * Recognising a UNIQUE index's refusal from either driver: PostgreSQL reports SQLSTATE 23505,
 * better-sqlite3 an extended result code. Kept in src/db with the other per-dialect knowledge,
 * so services catch "the row already exists" (e.g. a name taken by a concurrent create) without
 * naming a dialect.
 */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/**
 * Runs an insert or update of a row whose name is unique per tenant, answering name_taken when
 * the unique index refuses it: the look-up before a write cannot see a concurrent create of the
 * same name. `what` is the resource with its article ("an IP pool").
 */
export async function writeNamed<T>(what: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(what);
    throw err;
  }
}
