import { runSql } from '../../db/dialect.ts';
import type { Executor } from '../../db/executor.ts';
import { nowIso } from '../../lib/clock.ts';
import { insertEvents } from '../events/events.repo.ts';
import type { NewEvent } from '../events/events.types.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import type { Suppress } from './outcomes.ts';
import { REPORTED_BOUNCE } from './queue.sql.ts';

/** A report's bounce of a message handed over earlier, as the report's reader decided it. */
export interface ReportedBounce {
  id: string;
  tenant: string;
  /** The message's new last_response. */
  response: string;
  /** Its message.bounced event, written only if the message moves. */
  event: NewEvent;
  suppress: Suppress | null;
}

/** What a batch of reports does to messages (src/modules/feedback/report-batch.ts decides it). */
export interface ReportOutcomes {
  /** Bounces of `delivered` messages (the state moves, then their events and suppressions). */
  bounces: ReportedBounce[];
  /** Events that change no state (complaints, delays), in report order. */
  events: NewEvent[];
  /** Suppressions that do not depend on a state moving (complaints). */
  suppress: Suppress[];
}

/**
 * Writes a batch of reports' outcomes in the caller's transaction: one UPDATE for all bounced
 * messages, one insert of all events, one upsert of each tenant's suppressions. A bounce moves
 * only a message still `delivered`: a message another node bounced first was reported by that
 * node, so its event and suppression are not written twice. Returns the ids of the bounces that
 * moved.
 */
export async function recordReportOutcomes(
  trx: Executor,
  suppressions: SuppressionsService,
  batch: ReportOutcomes,
): Promise<Set<string>> {
  const events = [...batch.events];
  const suppress = [...batch.suppress];
  let moved = new Set<string>();
  if (batch.bounces.length > 0) {
    // Sorted by id: concurrent batches on PostgreSQL lock rows in one order (no deadlocks).
    const sorted = [...batch.bounces].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const payload = JSON.stringify(sorted.map((b) => [b.id, b.tenant, b.response]));
    moved = new Set((await runSql<{ id: string }>(trx, REPORTED_BOUNCE, [nowIso(), payload])).map((r) => r.id));
    for (const b of batch.bounces) {
      if (!moved.has(b.id)) continue;
      events.push(b.event);
      if (b.suppress) suppress.push(b.suppress);
    }
  }
  await insertEvents(trx, events);
  const byTenant = new Map<string, Suppress[]>();
  for (const s of suppress) {
    const list = byTenant.get(s.tenant);
    if (list) list.push(s);
    else byTenant.set(s.tenant, [s]);
  }
  for (const [tenant, list] of byTenant) await suppressions.addAutomaticMany(trx, tenant, list);
  return moved;
}
