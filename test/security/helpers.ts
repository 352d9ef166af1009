/**
 * Shared pieces of the security tests (docs/security.md): reading every stored row of a test
 * database, capturing log output, and a second container on a test context's database whose
 * logger writes into memory.
 */
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { loadConfig } from '../../src/config.ts';
import { type Container, createContainer } from '../../src/container.ts';
import { type App, buildApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import type { TestContext } from '../helpers/context.ts';

/** Every row of every table of the context's database (SQLite file or PostgreSQL schema). */
export async function dumpAllRows(ctx: TestContext): Promise<{ table: string; row: Record<string, unknown> }[]> {
  const db = ctx.c.database.db;
  const tables =
    ctx.c.database.dialect === 'postgres'
      ? (
          await sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
            WHERE table_schema = ${ctx.pgSchema} AND table_type = 'BASE TABLE'`.execute(db)
        ).rows
      : (
          await sql<{ name: string }>`SELECT name FROM sqlite_master
            WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`.execute(db)
        ).rows;
  const out: { table: string; row: Record<string, unknown> }[] = [];
  for (const { name } of tables) {
    const rows = await sql<Record<string, unknown>>`SELECT * FROM ${sql.table(name)}`.execute(db);
    for (const row of rows.rows) out.push({ table: name, row });
  }
  return out;
}

/** Where (table.column) any of `needles` occurs in the stored rows; [] when nowhere. */
export function findInRows(
  rows: { table: string; row: Record<string, unknown> }[],
  needles: Record<string, string>,
): string[] {
  const hits: string[] = [];
  for (const { table, row } of rows) {
    for (const [column, value] of Object.entries(row)) {
      if (value === null || value === undefined) continue;
      const text = Buffer.isBuffer(value) ? value.toString('latin1') : String(value);
      for (const [what, needle] of Object.entries(needles)) {
        if (text.includes(needle)) hits.push(`${what} in ${table}.${column}`);
      }
    }
  }
  return hits;
}

/**
 * The forms a secret can take in storage or logs: the whole value, its random part without a
 * public prefix (pyk_, whsec_), and for base64 secrets the decoded bytes in hex.
 */
export function secretForms(name: string, secret: string): Record<string, string> {
  const out: Record<string, string> = { [name]: secret };
  const m = /^(pyk_|whsec_|smtp_)(.+)$/.exec(secret);
  if (m?.[2]) out[`${name} (random part)`] = m[2];
  if (secret.startsWith('whsec_')) {
    out[`${name} (key bytes, hex)`] = Buffer.from(secret.slice(6), 'base64').toString('hex');
  }
  return out;
}

export interface CapturedLogs {
  logger: Logger;
  lines: string[];
  text(): string;
}

/** A real pino logger (the app's redaction rules) at `level`, writing into memory. */
export function captureLogs(level = 'trace'): CapturedLogs {
  const lines: string[] = [];
  const logger = createLogger(level, { write: (s: string) => void lines.push(s) });
  return { logger, lines, text: () => lines.join('') };
}

export interface Node {
  c: Container;
  app: App;
  close(): Promise<void>;
}

/** Another container and app on `ctx`'s database, with `logger` and extra environment. */
export async function nodeWithLogger(
  ctx: TestContext,
  logger: Logger,
  env: Record<string, string> = {},
): Promise<Node> {
  const config = loadConfig({ ...ctx.env, ...env });
  const c = await createContainer(config, logger, ctx.pgSchema ? { pgSchema: ctx.pgSchema } : {});
  const app = await buildApp(c);
  await app.ready();
  return {
    c,
    app,
    async close() {
      await app.close();
      await c.close();
    },
  };
}
