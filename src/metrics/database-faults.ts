import { Counter, type Registry } from 'prom-client';
import { DATABASE_FAULTS, type DatabaseFault } from '../db/faults.ts';

/** Where a request refused for a database fault came in. */
export type FaultVia = 'http' | 'smtp';

/**
 * postyard_database_faults_total{kind, via}: requests answered 503/507 over HTTP, or 451/452 over
 * SMTP submission, because the database was unreachable (`kind="unavailable"`) or out of storage
 * (`kind="storage_full"`) (src/db/faults.ts, docs/operations.md "When the database fails").
 * Every series exists from the start at 0, so rate() and the alert see them before a fault.
 */
export function databaseFaultCounter(registry: Registry): Counter<'kind' | 'via'> {
  const name = 'postyard_database_faults_total';
  const existing = registry.getSingleMetric(name) as Counter<'kind' | 'via'> | undefined;
  if (existing) return existing;
  const counter = new Counter({
    name,
    help: 'Requests refused because the database was unreachable (unavailable) or full (storage_full), by transport',
    labelNames: ['kind', 'via'] as const,
    registers: [registry],
  });
  for (const kind of DATABASE_FAULTS) for (const via of ['http', 'smtp']) counter.inc({ kind, via }, 0);
  return counter;
}

export function countDatabaseFault(registry: Registry, kind: DatabaseFault, via: FaultVia): void {
  databaseFaultCounter(registry).inc({ kind, via });
}
