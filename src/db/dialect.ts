import { CompiledQuery, PostgresAdapter } from 'kysely';
import { BoundedCache } from '../lib/bounded-cache.ts';
import type { Executor } from './executor.ts';

/**
 * The one place that knows which database runs, and the one way to write a statement for both.
 *
 * Most queries go through Kysely's builder and need neither. Hot statements (claims, outcomes,
 * batch inserts, fan-out) are written as SQL text instead: building them through the builder
 * (object freezing, AST visiting, compiling) cost more CPU than the database took to run them.
 * Such text is declared here, per dialect, never assembled with `pg ? ... : ...` in a module.
 */
export type Dialect = 'sqlite' | 'postgres';

/** What can tell the dialect: the Database handle, or any Kysely instance or open transaction. */
export type DialectSource = { readonly dialect: Dialect } | Executor;

export function dialectOf(on: DialectSource): Dialect {
  if ('dialect' in on) return on.dialect;
  return on.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}

/** The one test of "is this PostgreSQL?" (SQLite otherwise). */
export function isPostgres(on: DialectSource): boolean {
  return dialectOf(on) === 'postgres';
}

/**
 * One statement with a fixed text per dialect. A list parameter (an array) is a JSON array on
 * SQLite, read with `json_each(?)`, and an array on PostgreSQL (`= any($1::text[])`), so the text
 * is the same whatever the list length: one prepared statement on SQLite, not one per length.
 */
export interface DialectSql {
  /** SQLite text with plain `?` (better-sqlite3 binds numbered `?N` as named parameters)... */
  readonly sqlite: string;
  /** ...and which logical parameter each `?` takes, in text order (default: 0, 1, 2, ...). */
  readonly sqliteArgs?: readonly number[];
  /** PostgreSQL text, `$N` being logical parameter N-1. */
  readonly postgres: string;
}

/** Declares a statement for both dialects (checked and frozen once, at module load). */
export function dialectSql<T extends DialectSql>(statement: T): Readonly<T> {
  const uses = statement.sqliteArgs?.length ?? 0;
  if (uses && uses !== (statement.sqlite.match(/\?/g)?.length ?? 0)) {
    throw new Error(`sqliteArgs has ${uses} entries for a statement with another number of ?: ${statement.sqlite}`);
  }
  return Object.freeze(statement);
}

/**
 * The SQLite half of a statement written with PostgreSQL's `$N` placeholders: `?` in their place
 * and the argument order to bind them in. For statements that differ only in placeholders (and
 * whatever the caller substitutes before): `dialectSql({ postgres: t, ...sqliteFromNumbered(t) })`.
 * The text must hold no `$` other than placeholders (our statements never quote one).
 */
export function sqliteFromNumbered(text: string): { sqlite: string; sqliteArgs: number[] } {
  const sqliteArgs: number[] = [];
  const sqlite = text.replace(/\$(\d+)/g, (_, n: string) => {
    sqliteArgs.push(Number(n) - 1);
    return '?';
  });
  return { sqlite, sqliteArgs };
}

/** The text of `statement` for the running dialect. */
export function sqlText(on: DialectSource, statement: DialectSql): string {
  return isPostgres(on) ? statement.postgres : statement.sqlite;
}

/**
 * Runs a statement: a DialectSql with logical `params` (array parameters bound as lists, see
 * above), or a text from a shapedSql family, whose params are bound as given.
 */
export async function runSql<R>(
  db: Executor,
  statement: DialectSql | string,
  params: readonly unknown[],
): Promise<R[]> {
  return (await db.executeQuery<R>(compiled(db, statement, params))).rows as R[];
}

/** Runs a statement as runSql does, for how many rows it changed (an UPDATE without RETURNING). */
export async function runSqlCount(db: Executor, statement: DialectSql, params: readonly unknown[]): Promise<number> {
  return Number((await db.executeQuery(compiled(db, statement, params))).numAffectedRows ?? 0);
}

function compiled(db: Executor, statement: DialectSql | string, params: readonly unknown[]): CompiledQuery {
  if (typeof statement === 'string') return CompiledQuery.raw(statement, params as unknown[]);
  const pg = isPostgres(db);
  let bound: readonly unknown[] = params;
  if (!pg) {
    const json = params.map((p) => (Array.isArray(p) ? JSON.stringify(p) : p));
    bound = statement.sqliteArgs ? statement.sqliteArgs.map((i) => json[i]) : json;
  }
  return CompiledQuery.raw(pg ? statement.postgres : statement.sqlite, bound as unknown[]);
}

/** The placeholder of logical parameter `n` (1-based): `$n` on PostgreSQL, `?` on SQLite. */
export type Placeholder = (n: number) => string;
const PG_PARAM: Placeholder = (n) => `$${n}`;
const SQLITE_PARAM: Placeholder = () => '?';

/**
 * A family of statements whose text depends on a shape (a row count, a column list): multi-row
 * INSERTs, VALUES lists, IN lists. `build` writes the text for one dialect and shape; it is
 * built once and kept in a bounded cache of `max` texts (least recently used dropped first).
 * SQLite binds `?` in text order, so `build` must use the parameters in text order.
 * Shape parts become the cache key (joined with `|`): they are our own identifiers and counts,
 * never input.
 */
export function shapedSql<S extends readonly unknown[]>(
  max: number,
  build: (param: Placeholder, dialect: Dialect, ...shape: S) => string,
): (on: DialectSource, ...shape: S) => string {
  const texts = new BoundedCache<string, string>(max);
  return (on, ...shape) => {
    const dialect = dialectOf(on);
    const key = `${dialect}|${shape.join('|')}`;
    let text = texts.get(key);
    if (text === undefined) {
      text = build(dialect === 'postgres' ? PG_PARAM : SQLITE_PARAM, dialect, ...shape);
      texts.set(key, text);
    }
    return text;
  };
}

/**
 * Whether only processes of one host can open this database (SQLite: a file; PostgreSQL is
 * shared by nodes on many hosts). A run whose process is gone on such a database is dead for sure.
 */
export function isOneHostDatabase(on: DialectSource): boolean {
  return !isPostgres(on);
}
