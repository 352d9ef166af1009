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
