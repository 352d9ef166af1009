import { createRequire } from 'node:module';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { type DatabaseIntrospector, Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type pg from 'pg';
import { ensurePrivateDir, ensurePrivateFile, tightenFiles } from '../lib/private-files.ts';
import { type Dialect, isPostgres } from './dialect.ts';
import { markDatabaseError } from './faults.ts';
import { migrations } from './migrations/index.ts';
import type { DB } from './schema.ts';
import { namePreparedStatements } from './prepared.ts';
import { startCheckpointer } from './sqlite-checkpointer.ts';
import { withStatementCache } from './statement-cache.ts';

export type { Dialect } from './dialect.ts';

export interface Database {
  db: Kysely<DB>;
  dialect: Dialect;
  /** Pings the database (readiness). */
  ping(): Promise<void>;
  /**
   * Opens the connections a busy node will use before it takes requests (PostgreSQL: the whole
   * pool; each new connection costs a TCP handshake, authentication and backend start, several
   * milliseconds that would otherwise land on the first requests). SQLite has nothing to open.
   */
  warm(): Promise<void>;
  /** Connections open now (PostgreSQL: the pool's, in use or idle; SQLite: its one handle). */
  connections(): number;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** postgres://... ; null selects SQLite. */
  databaseUrl: string | null;
  /** Directory holding postyard.sqlite when on SQLite. */
  dataDir: string;
  /** PostgreSQL pool size. Default 10. */
  poolSize?: number;
  /** PostgreSQL schema to use (tests isolate themselves this way). Default: server default. */
  pgSchema?: string;
  /** SQLite `synchronous`: normal (default) or full (a WAL flush at every commit). */
  sqliteSynchronous?: 'normal' | 'full';
  /** SQLite page cache of the main connection, MiB (default 64). */
  sqliteCacheMb?: number;
}

export function openDatabase(opts: DatabaseOptions): Database {
  if (opts.databaseUrl) return openPostgres(opts.databaseUrl, opts.poolSize ?? 10, opts.pgSchema);
  ensurePrivateDir(opts.dataDir);
  const file = join(opts.dataDir, 'postyard.sqlite');
  // SQLite creates the database 0644 and gives -wal/-shm the database file's mode: create it
  // 0600 first, and tighten files an older version left readable.
  ensurePrivateFile(file);
  tightenFiles(`${file}-wal`, `${file}-shm`, `${file}-journal`);
  const database = openSqlite(file, opts.sqliteSynchronous ?? 'normal', opts.sqliteCacheMb ?? 64);
  tightenFiles(`${file}-wal`, `${file}-shm`);
  return database;
}

function openSqlite(file: string, synchronous: 'normal' | 'full', cacheMb: number): Database {
  const raw = new SqliteDatabase(file);
  // WAL: readers never block the writer. synchronous=NORMAL in WAL mode survives a process crash
  // (kill -9) without losing committed transactions; only an OS crash/power loss can drop the
  // last commits (synchronous=FULL, POSTYARD_SQLITE_SYNCHRONOUS=full, flushes the WAL at every
  // commit and closes that gap). busy_timeout lets CLI commands and the server share the file.
  raw.pragma('journal_mode = WAL');
  raw.pragma(`synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  raw.pragma('busy_timeout = 5000');
  raw.pragma('foreign_keys = ON');
  // SQLite's default page cache is 2 MB. A server's indexes outgrow that within minutes (events by
  // recipient take inserts all over their B-tree), and every page that falls out is read back
  // through a system call on this, the event loop's, thread. Negative = KiB.
  raw.pragma(`cache_size = -${cacheMb * 1024}`);
  const checkpointer = startCheckpointer(raw, file);
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: withStatementCache(raw) }) });
  return {
    db,
    dialect: 'sqlite',
    async ping() {
      await sql`select 1`.execute(db);
    },
    async warm() {},
    connections: () => 1,
    async close() {
      await checkpointer.stop();
      await db.destroy();
    },
  };
}

let pgModule: typeof pg | undefined;
/** The pg driver, loaded on the first PostgreSQL connection: a SQLite start does not pay for it. */
function loadPg(): typeof pg {
  if (!pgModule) {
    pgModule = createRequire(import.meta.url)('pg') as typeof pg;
    // Return int8/numeric as numbers: our counters stay far below 2^53.
    pgModule.types.setTypeParser(20, (v) => Number(v));
    pgModule.types.setTypeParser(1700, (v) => Number(v));
  }
  return pgModule;
}

/**
 * Kysely's PostgreSQL introspector reads the catalog of every schema (and calls
 * pg_get_serial_sequence on every column), so DDL running at the same time in any other schema can
 * make it fail. The migrator only asks "does this table exist?": answer from our own schema alone.
 */
class OwnSchemaPostgresDialect extends PostgresDialect {
  // biome-ignore lint/suspicious/noExplicitAny: Kysely's own signature
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    const getTables = async () => {
      const { rows } = await sql<{ schema: string; name: string; kind: string }>`
        select n.nspname as schema, c.relname as name, c.relkind as kind
        from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p', 'v')`.execute(db);
      return rows.map((r) => ({ schema: r.schema, name: r.name, isView: r.kind === 'v', columns: [] }));
    };
    return {
      getSchemas: async () =>
        (await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(db)).rows,
      getTables,
      getMetadata: async () => ({ tables: await getTables() }),
    };
  }
}

function openPostgres(url: string, poolSize: number, schema?: string): Database {
  const pool = new (loadPg().Pool)({
    connectionString: url,
    max: poolSize,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  });
  // An idle client's error (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // pg-pool listens for errors on idle clients only: a checked-out client whose backend is
  // terminated (a restart, pg_terminate_backend) gets the FATAL on its query and then emits
  // 'Connection terminated unexpectedly' with no listener, an uncaught exception that ended the
  // process. The query already failed with the error; the pool drops the dead client on release.
  pool.on('connect', (client) => {
    client.on('error', () => {});
    namePreparedStatements(client);
    markQueryErrors(client);
  });
  // Errors of the pool and its connections are marked as the database's (faults.ts): a refused
  // or reset socket then answers 503, where the same code from elsewhere stays a 500.
  const marked = {
    connect: () => pool.connect().catch((err: unknown) => Promise.reject(markDatabaseError(err))),
    end: () => pool.end(),
  };
  const db = new Kysely<DB>({ dialect: new OwnSchemaPostgresDialect({ pool: marked }) });
  return {
    db,
    dialect: 'postgres',
    async ping() {
      await sql`select 1`.execute(db);
    },
    connections: () => pool.totalCount,
    async warm() {
      // All at once: each connect waits for the server, not for the others. Released, they stay
      // in the pool as idle connections (pg-pool closes one only after 10 s unused).
      const clients = await Promise.all(Array.from({ length: poolSize }, () => pool.connect()));
      try {
        await Promise.all(clients.map((client) => client.query('select 1')));
      } finally {
        for (const client of clients) client.release();
      }
    },
    async close() {
      await db.destroy();
    },
  };
}

/** Marks the errors of `client.query`'s promise calls as the database's (faults.ts). */
function markQueryErrors(client: pg.PoolClient): void {
  const target = client as unknown as { query: (...args: unknown[]) => unknown };
  const query = target.query.bind(client);
  target.query = (...args: unknown[]) => {
    const result = query(...args);
    return result instanceof Promise ? result.catch((err: unknown) => Promise.reject(markDatabaseError(err))) : result;
  };
}

export async function migrateToLatest(database: Database): Promise<string[]> {
  // PostgreSQL: name the schema of the migration tables. Without it Kysely's "table exists?" check
  // looks at every schema, sees another schema's kysely_migration tables and never creates ours.
  const schema = isPostgres(database)
    ? (await sql<{ s: string | null }>`select current_schema() as s`.execute(database.db)).rows[0]?.s
    : null;
  const migrator = new Migrator({
    db: database.db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** The value serialized for a JSON text column. */
export function toJson(value: unknown): string {
  return JSON.stringify(value ?? null);
}

export function fromJson<T>(text: string | null | undefined, fallback: T): T {
  if (text === null || text === undefined) return fallback;
  return JSON.parse(text) as T;
}
