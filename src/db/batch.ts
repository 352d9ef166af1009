import type { Insertable } from 'kysely';
import type { Pacer } from '../lib/pacer.ts';
import { isPostgres, runSql, shapedSql } from './dialect.ts';
import { PREPARED } from './prepared.ts';
import { insertBufferOf } from './deferred-inserts.ts';
import type { Executor } from './executor.ts';
import type { DB } from './schema.ts';

/** SQLite allows 32,766 bound parameters per statement; PostgreSQL 65,535. Stay under both. */
const MAX_PARAMS = 30_000;

/**
 * The INSERT text per (dialect, table, columns, row count). Accepting a message inserts into
 * four tables; building those statements through Kysely's query builder (object freezing, AST
 * visiting, compiling) cost more CPU than SQLite took to run them, so hot inserts are written
 * here once and reused. Identifiers come from our own schema types, never from input.
 */
const insertSql = shapedSql(2000, (param, _dialect, table: string, cols: readonly string[], rows: number) => {
  let n = 0;
  const tuple = () => `(${cols.map(() => param(++n)).join(', ')})`;
  const values = Array.from({ length: rows }, tuple).join(', ');
  return `insert into "${table}" (${cols.map((c) => `"${c}"`).join(', ')}) values ${values}`;
});

/** Rows per statement when paced: a few ms of SQLite work each, so the pacer can yield between them. */
const PACED_ROWS = 500;

/**
 * Multi-row INSERT split into chunks that respect the bound-parameter limits. With `pace`, the
 * chunks are smaller and the event loop gets a turn between them when the slice is used up: the
 * caller's transaction stays open across that turn, which is safe because Kysely hands the
 * connection to nobody else until it ends (SQLite: one connection; PostgreSQL: this client).
 */
export async function insertMany<T extends keyof DB & string>(
  db: Executor,
  table: T,
  rows: Insertable<DB[T]>[],
  pace?: Pacer,
): Promise<void> {
  if (rows.length === 0) return;
  const buffer = insertBufferOf(db);
  if (buffer) return buffer.add(table, rows);
  const cols = Object.keys(rows[0] as object);
  const byParams = Math.max(1, Math.floor(MAX_PARAMS / (cols.length || 1)));
  const chunk = pace ? Math.min(byParams, PACED_ROWS) : byParams;
  for (let i = 0; i < rows.length; i += chunk) {
    if (pace && i > 0) await pace.tick();
    const part = rows.slice(i, i + chunk) as Record<string, unknown>[];
    const params: unknown[] = [];
    for (const row of part) {
      // Every row must have exactly the first row's columns (our callers build uniform rows);
      // anything else goes through the query builder, which fills the gaps with DEFAULT.
      if (Object.keys(row).length !== cols.length) return insertWithBuilder(db, table, rows.slice(i));
      for (const c of cols) {
        const v = row[c];
        if (v === undefined) return insertWithBuilder(db, table, rows.slice(i));
        params.push(v);
      }
    }
    await runSql(db, insertSql(db, table, cols, part.length), params);
  }
}

async function insertWithBuilder<T extends keyof DB & string>(db: Executor, table: T, rows: Insertable<DB[T]>[]) {
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

/**
 * The rows a group-commit batch held back (src/db/deferred-inserts.ts), written in the order
 * given (parents before children). On PostgreSQL all tables go in one statement (see
 * oneStatement): every statement is a round trip the batch waits for, and the foreign keys are
 * checked at the end of the statement, when all rows are in. SQLite (no round trips) takes one
 * multi-row INSERT per table.
 */
export async function insertGroups(
  db: Executor,
  groups: { table: string; rows: Record<string, unknown>[] }[],
  pace: Pacer,
): Promise<void> {
  const live = groups.filter((g) => g.rows.length > 0);
  const one = await oneStatement(db, live, pace);
  if (one) {
    await runSql(db, one.sql, one.params);
    return;
  }
  for (const g of live) await insertMany(db, g.table as keyof DB & string, g.rows as never[], pace);
}

/**
 * Most checks (one per tenant of a batch, src/db/coalesce.ts) in a text that is prepared by name:
 * more tenants in one batch make a rarer text, run unnamed, so no connection collects a prepared
 * statement per batch size.
 */
const MAX_PREPARED_CHECKS = 4;

/**
 * PostgreSQL: the INSERTs of all `groups` as one statement (data-modifying WITH clauses), or
 * null when that is not possible (SQLite, rows that are not uniform). One statement is atomic
 * on its own, in a transaction or not.
 *
 * Each table's rows go as one JSON parameter expanded by json_populate_recordset (typed by the
 * table's own row type), not as a VALUES list with a parameter per cell: the statement's text
 * then depends only on the tables and columns, not on the row count, so the server parses and
 * plans a short text instead of one with thousands of placeholders, the client serializes the
 * rows with one native JSON.stringify instead of a parameter each, and a 10,000-recipient
 * transmission (30,000 rows) is one statement instead of ~60 of 500 rows in a transaction.
 * Rows holding anything but strings, finite numbers, booleans and null (a Buffer, a
 * Date), or text JSON cannot carry to PostgreSQL unchanged (a lone UTF-16 surrogate, which the
 * parameter path sends as U+FFFD), take the VALUES form, within the parameter limit.
 */
export async function oneStatement(
  db: Executor,
  groups: { table: string; rows: Record<string, unknown>[] }[],
  pace?: Pacer,
  checks: readonly Check[] = [],
): Promise<{ sql: string; params: unknown[] } | null> {
  const live = groups.filter((g) => g.rows.length > 0);
  if (live.length === 0 || !isPostgres(db)) return null;
  const shape: string[] = [];
  for (const g of live) {
    const cols = uniformColumns(g.rows, jsonSafe);
    if (!cols) return checks.length > 0 ? null : valuesStatement(db, live);
    shape.push(`${g.table}:${cols.join(',')}`);
  }
  const params: unknown[] = [];
  for (const g of live) {
    const json = await stringifyRows(g.rows, pace);
    if (LONE_SURROGATE.test(json)) return checks.length > 0 ? null : valuesStatement(db, live);
    params.push(json);
  }
  const body = insertJsonSql(db, shape.join(';'), checks.length);
  // Prepared by name (src/db/prepared.ts): the texts are a small family (the tables' column lists
  // and up to MAX_PREPARED_CHECKS checks), each run thousands of times a second under load.
  const mark = checks.length <= MAX_PREPARED_CHECKS ? PREPARED : '';
  if (checks.length === 0) return { sql: `${mark}with ${body}`, params };
  const ctes = checks.map((c, i) => {
    const cte = `g${i} as materialized (${c.sql(params.length + 1)})`;
    params.push(...c.params);
    return cte;
  });
  return { sql: `${mark}with ${ctes.join(', ')}, ${body}`, params };
}

/** The checks alone, as oneStatement would run them with rows (same result columns). */
export function checkStatement(checks: readonly Check[]): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const ctes = checks.map((c, i) => {
    const cte = `g${i} as materialized (${c.sql(params.length + 1)})`;
    params.push(...c.params);
    return cte;
  });
  const result = checks
    .map((_, i) => `select ${i} as "guard", row_to_json(g${i}) as "row" from g${i}`)
    .join(' union all ');
  return { sql: `with ${ctes.join(', ')} ${result}`, params };
}

/**
 * A SELECT the statement of oneStatement runs first (src/db/coalesce.ts Guard): the rows are
 * inserted only if no check returns a row, and the statement returns the checks' rows as
 * (`guard`: the check's index, `row`: the row as JSON); none means the rows went in.
 */
export interface Check {
  /** The SELECT, its parameters numbered from `first`. */
  sql(first: number): string;
  params: readonly unknown[];
}

/** The first row's columns if every row has exactly them, each value passing `ok`; else null. */
function uniformColumns(rows: Record<string, unknown>[], ok: (v: unknown) => boolean): string[] | null {
  const cols = Object.keys(rows[0] as object);
  for (const row of rows) {
    if (Object.keys(row).length !== cols.length) return null;
    for (const c of cols) if (!ok(row[c])) return null;
  }
  return cols;
}

function jsonSafe(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** JSON.stringify writes a lone surrogate as a lowercase escape; PostgreSQL's json refuses it as text. */
const LONE_SURROGATE = /\\ud[89a-f]/;

/** Rows per JSON.stringify call when paced: a few ms each, so the event loop gets turns between them. */
const JSON_CHUNK = 1000;

async function stringifyRows(rows: Record<string, unknown>[], pace?: Pacer): Promise<string> {
  if (!pace || rows.length <= JSON_CHUNK) return JSON.stringify(rows);
  const parts: string[] = [];
  for (let i = 0; i < rows.length; i += JSON_CHUNK) {
    if (i > 0) await pace.tick();
    parts.push(JSON.stringify(rows.slice(i, i + JSON_CHUNK)).slice(1, -1));
  }
  return `[${parts.join(',')}]`;
}

/** The VALUES form of oneStatement: a parameter per cell, null past the parameter limit. */
function valuesStatement(
  db: Executor,
  live: { table: string; rows: Record<string, unknown>[] }[],
): { sql: string; params: unknown[] } | null {
  const params: unknown[] = [];
  const shape: string[] = [];
  for (const g of live) {
    const cols = Object.keys(g.rows[0] as object);
    for (const row of g.rows) {
      if (Object.keys(row).length !== cols.length) return null;
      for (const c of cols) {
        const v = row[c];
        if (v === undefined) return null;
        params.push(v);
      }
    }
    if (params.length > MAX_PARAMS) return null;
    shape.push(`${g.table}:${cols.join(',')}:${g.rows.length}`);
  }
  return { sql: insertAllSql(db, shape.join(';')), params };
}

/**
 * `t0 as (insert ... select ... from json_populate_recordset(...)), ... select 1` for "table:cols;..."
 * (PostgreSQL; the caller puts `with` and any checks g0..g(checks-1) in front). With checks, each
 * INSERT takes its rows only where no check found a row, and the statement returns those rows.
 */
const insertJsonSql = shapedSql(500, (param, _dialect, shape: string, checks: number) => {
  const gs = Array.from({ length: checks }, (_, i) => `g${i}`);
  const where = checks > 0 ? ` where ${gs.map((g) => `not exists (select 1 from ${g})`).join(' and ')}` : '';
  const parts = shape.split(';').map((part, i) => {
    const [table, colList] = part.split(':') as [string, string];
    const cols = colList
      .split(',')
      .map((c) => `"${c}"`)
      .join(', ');
    return `t${i} as (insert into "${table}" (${cols}) select ${cols} from json_populate_recordset(null::"${table}", ${param(i + 1)}::json)${where})`;
  });
  const result =
    checks > 0
      ? gs.map((g, i) => `select ${i} as "guard", row_to_json(${g}) as "row" from ${g}`).join(' union all ')
      : 'select 1';
  return `${parts.join(', ')} ${result}`;
});

/** `with t0 as (insert ...), t1 as (insert ...) select 1` for a shape "table:cols:rows;..." (PostgreSQL). */
const insertAllSql = shapedSql(500, (param, _dialect, shape: string) => {
  let n = 0;
  const parts = shape.split(';').map((part, i) => {
    const [table, colList, rowCount] = part.split(':') as [string, string, string];
    const cols = colList.split(',');
    const tuple = () => `(${cols.map(() => param(++n)).join(', ')})`;
    const values = Array.from({ length: Number(rowCount) }, tuple).join(', ');
    return `t${i} as (insert into "${table}" (${cols.map((c) => `"${c}"`).join(', ')}) values ${values})`;
  });
  return `with ${parts.join(', ')} select 1`;
});
