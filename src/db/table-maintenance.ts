import { sql } from 'kysely';
import type { Logger } from 'pino';
import { isPostgres } from './dialect.ts';
import type { Database } from './index.ts';
import { acquireLease } from './lease.ts';

/**
 * PostgreSQL with autovacuum turned off (an operator's choice; the PostgreSQL of this project's CI
 * machines runs so): nothing refreshes the planner's statistics or removes dead rows. A day's
 * events partition is created ahead, empty, so its statistics say "no rows" for as long as nobody
 * analyzes it, and the newest-page query of GET /v1/events then reads the whole day and sorts it
 * instead of reading 50 entries of the (tenant_id, id) index backwards: 182 ms at 86,000 events,
 * growing with the day (found by the PostgreSQL soak, docs/benchmarks.md). The queue tables
 * (messages, webhook_queue) fill with dead rows the same way.
 *
 * So, on one node at a time and only while the server's `autovacuum` is off, this job does what
 * autovacuum would: ANALYZE a table of our schema once the rows changed since its last analysis
 * pass its analyze threshold + scale factor x its size, VACUUM (ANALYZE) it once its dead rows
 * pass its vacuum threshold + scale factor x its size: the server's settings
 * (autovacuum_vacuum_threshold, ...: 50 + 20 % and 50 + 10 % by default), or the table's own
 * where it has them (its storage parameters, as autovacuum reads them: `messages` has
 * 1,000 + 2 %, migration 022). With autovacuum on it does nothing: the server does it better.
 *
 * Every 10 s: each pass is one catalog query unless something is due. A fresh database's tables
 * grow from nothing in their first minute, and until their first ANALYZE the planner guesses:
 * in the PostgreSQL soak the newest-page events query read 2,000-7,000 index entries per page
 * and the delivery worker's transmissions lookups 700-4,900 in the first 40 s (every 30 s then), against
 * 50-70 once analyzed.
 */
export const TABLE_MAINTENANCE_INTERVAL_MS = 10_000;
const LEASE_MS = 5 * 60_000;

interface TableStats {
  name: string;
  tuples: number;
  changed: number;
  dead: number;
  /** pg_class.reloptions: the table's storage parameters, `name=value` each (null: none). */
  options: string[] | null;
}

/** The autovacuum settings maintenance follows: threshold + scale factor x rows, for each action. */
export interface Thresholds {
  vacuumThreshold: number;
  vacuumScaleFactor: number;
  analyzeThreshold: number;
  analyzeScaleFactor: number;
}

const SETTING_OF: Record<keyof Thresholds, string> = {
  vacuumThreshold: 'autovacuum_vacuum_threshold',
  vacuumScaleFactor: 'autovacuum_vacuum_scale_factor',
  analyzeThreshold: 'autovacuum_analyze_threshold',
  analyzeScaleFactor: 'autovacuum_analyze_scale_factor',
};

/** The server's thresholds, overridden by those among a table's storage parameters. */
export function tableThresholds(server: Thresholds, options: readonly string[] | null): Thresholds {
  const out = { ...server };
  for (const opt of options ?? []) {
    const at = opt.indexOf('=');
    const name = opt.slice(0, at);
    const value = Number(opt.slice(at + 1));
    for (const key of Object.keys(SETTING_OF) as (keyof Thresholds)[]) {
      if (SETTING_OF[key] === name && Number.isFinite(value) && value >= 0) out[key] = value;
    }
  }
  return out;
}

async function serverThresholds(database: Database): Promise<Thresholds> {
  const { rows } = await sql<Record<keyof Thresholds, string>>`select
      current_setting('autovacuum_vacuum_threshold') as "vacuumThreshold",
      current_setting('autovacuum_vacuum_scale_factor') as "vacuumScaleFactor",
      current_setting('autovacuum_analyze_threshold') as "analyzeThreshold",
      current_setting('autovacuum_analyze_scale_factor') as "analyzeScaleFactor"`.execute(database.db);
  const r = rows[0];
  return {
    vacuumThreshold: Number(r?.vacuumThreshold ?? 50),
    vacuumScaleFactor: Number(r?.vacuumScaleFactor ?? 0.2),
    analyzeThreshold: Number(r?.analyzeThreshold ?? 50),
    analyzeScaleFactor: Number(r?.analyzeScaleFactor ?? 0.1),
  };
}

export interface MaintenanceResult {
  analyzed: string[];
  vacuumed: string[];
}

/** Whether the server's autovacuum launcher runs (the `autovacuum` setting). */
export async function autovacuumOn(database: Database): Promise<boolean> {
  const { rows } = await sql<{ on: string }>`select current_setting('autovacuum') as "on"`.execute(database.db);
  return rows[0]?.on === 'on';
}

/** The tables (and partitions) of our schema that are due for ANALYZE or VACUUM. */
async function dueTables(database: Database): Promise<{ analyze: string[]; vacuum: string[] }> {
  const { rows } = await sql<TableStats>`
    select t.relname as name, greatest(c.reltuples, 0)::float8 as tuples,
           t.n_mod_since_analyze::float8 as changed, t.n_dead_tup::float8 as dead, c.reloptions as options
    from pg_stat_user_tables t join pg_class c on c.oid = t.relid
    where t.schemaname = current_schema() and c.relkind = 'r'`.execute(database.db);
  const server = await serverThresholds(database);
  const vacuum: string[] = [];
  const analyze: string[] = [];
  for (const r of rows) {
    const t = tableThresholds(server, r.options);
    if (r.dead > t.vacuumThreshold + t.vacuumScaleFactor * r.tuples) vacuum.push(r.name);
    else if (r.changed > t.analyzeThreshold + t.analyzeScaleFactor * r.tuples) analyze.push(r.name);
  }
  return { analyze, vacuum };
}

/**
 * One pass. `force` runs it whatever the autovacuum setting (tests). A table that fails (dropped
 * meanwhile: a retention run drops old partitions) is skipped; the rest still run.
 */
export async function maintainTables(
  database: Database,
  holder: string,
  logger: Logger,
  opts: { force?: boolean } = {},
): Promise<MaintenanceResult> {
  const done: MaintenanceResult = { analyzed: [], vacuumed: [] };
  if (!isPostgres(database)) return done;
  if (!opts.force && (await autovacuumOn(database))) return done;
  if (!(await acquireLease(database, 'table-maintenance', holder, LEASE_MS))) return done;
  const due = await dueTables(database);
  for (const name of due.vacuum) {
    try {
      await sql`vacuum (analyze) ${sql.table(name)}`.execute(database.db);
      done.vacuumed.push(name);
    } catch (err) {
      logger.warn({ err, table: name }, 'vacuum failed');
    }
  }
  for (const name of due.analyze) {
    try {
      await sql`analyze ${sql.table(name)}`.execute(database.db);
      done.analyzed.push(name);
    } catch (err) {
      logger.warn({ err, table: name }, 'analyze failed');
    }
  }
  if (done.analyzed.length || done.vacuumed.length) logger.debug(done, 'tables maintained (autovacuum is off)');
  return done;
}

/**
 * Whether this node must maintain the tables itself: PostgreSQL with its autovacuum off (the
 * pass is a no-op otherwise; SQLite has nothing of the kind).
 */
export async function ownMaintenanceNeeded(database: Database): Promise<boolean> {
  return isPostgres(database) && !(await autovacuumOn(database));
}
