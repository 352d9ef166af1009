import { sql } from 'kysely';
import type { Logger } from 'pino';
import { type Container, every } from '../container.ts';
import { isPostgres } from '../db/dialect.ts';
import type { Database } from '../db/index.ts';
import type { Stoppable } from '../engine.ts';
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
 * pass 50 + 10 % of its size, VACUUM (ANALYZE) it once its dead rows pass 50 + 20 % (the
 * server's default thresholds). With autovacuum on it does nothing: the server does it better.
 */
export const TABLE_MAINTENANCE_INTERVAL_MS = 30_000;
const LEASE_MS = 5 * 60_000;

interface TableStats {
  name: string;
  tuples: number;
  changed: number;
  dead: number;
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
           t.n_mod_since_analyze::float8 as changed, t.n_dead_tup::float8 as dead
    from pg_stat_user_tables t join pg_class c on c.oid = t.relid
    where t.schemaname = current_schema() and c.relkind = 'r'`.execute(database.db);
  const vacuum = rows.filter((r) => r.dead > 50 + 0.2 * r.tuples).map((r) => r.name);
  const analyze = rows.filter((r) => r.changed > 50 + 0.1 * r.tuples && !vacuum.includes(r.name)).map((r) => r.name);
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

/** Worker role: the pass every 30 s; PostgreSQL with autovacuum off only (see above). */
export function start(c: Container): Stoppable {
  if (isPostgres(c.database)) {
    let warned = false;
    every(c, TABLE_MAINTENANCE_INTERVAL_MS, 'table-maintenance', async () => {
      if (!warned && !(await autovacuumOn(c.database))) {
        warned = true;
        c.logger.warn(
          'PostgreSQL autovacuum is off: Postyard analyzes and vacuums its own tables (docs/operations.md "PostgreSQL sizing")',
        );
      }
      await maintainTables(c.database, c.node.holder, c.logger);
    });
  }
  return { name: 'table-maintenance', stop: async () => {} };
}
