import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Database } from '../db/index.ts';
import { databaseFaultCounter } from './database-faults.ts';
import { inboundCounter } from './inbound-messages.ts';
import { mailMetrics } from './mail-metrics.ts';
import { installQueueGauges } from './queue-gauges.ts';

/**
 * Prometheus metrics on a registry of our own (several apps can live in one test process): the
 * process's defaults, the mail path's series (they exist from the start on every role), and the
 * queue depth read from `database` at scrape time.
 */
export function createMetricsRegistry(database: Database): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  mailMetrics(registry);
  inboundCounter(registry);
  databaseFaultCounter(registry);
  installQueueGauges(registry, database);
  return registry;
}
