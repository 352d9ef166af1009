import { insertMany } from '../../db/batch.ts';
import type { Database } from '../../db/index.ts';
import type { WebhookDeliveriesTable, WebhookQueueTable } from '../../db/schema.ts';
import { newId } from '../../lib/ids.ts';
import { runSql } from '../../db/dialect.ts';
import { relaxed } from './queue.repo.ts';
import { SQL } from './queue.sql.ts';
import { disableWebhook } from './webhooks.repo.ts';

/** The database effect of one finished unit, or of one POST on a webhook's failure tracking. */
export interface CompletionWrite {
  webhookId: string;
  /**
   * A finished unit: removed (delivered, given up, gone) or kept for another attempt (`retry`),
   * and events handed back unsent while others of it failed, split off into a new unit.
   */
  unit?: {
    id: string;
    retry: { eventIds: string[]; attempts: number; nextAt: string } | null;
    split?: { eventIds: string[]; attempts: number; nextAt: string; tenantId: string; oldestEventAt: string };
  };
  /** Attempt log entry of a POST. */
  log?: WebhookDeliveriesTable;
  /** Outcome of a POST for failure tracking; absent for unit-only writes. */
  ok?: boolean;
  gone?: boolean;
  at: string;
}

export interface DisabledWebhook {
  id: string;
  reason: string;
}

/**
 * Applies a buffer of completions in one transaction: units, the attempt log, and each
 * webhook's failure run (its start is kept until a success; `disableBefore` is the start time
 * from which a run counts as five days of nothing but failures).
 */
export async function applyCompletions(
  database: Database,
  writes: CompletionWrite[],
  disableBefore: string,
): Promise<DisabledWebhook[]> {
  const disabled: DisabledWebhook[] = [];
  // One DELETE per webhook for the whole buffer, whatever the number of units.
  const removals = new Map<string, string[]>();
  for (const w of writes) {
    if (!w.unit || w.unit.retry) continue;
    const list = removals.get(w.webhookId);
    if (list) list.push(w.unit.id);
    else removals.set(w.webhookId, [w.unit.id]);
  }
  await database.db.transaction().execute(async (trx) => {
    await relaxed(trx);
    for (const [webhookId, ids] of removals) await runSql(trx, SQL.deleteUnits, [webhookId, ids]);
    const byWebhook = new Map<string, { lastOk: boolean; failSince: string | null; at: string; gone: boolean }>();
    const splits: WebhookQueueTable[] = [];
    for (const w of writes) {
      const retry = w.unit?.retry;
      if (w.unit && retry) {
        await runSql(trx, SQL.retryUnit, [
          w.webhookId,
          w.unit.id,
          JSON.stringify(retry.eventIds),
          retry.eventIds.length,
          retry.attempts,
          retry.nextAt,
        ]);
      }
      const split = w.unit?.split;
      if (split)
        splits.push({
          webhook_id: w.webhookId,
          id: newId(),
          tenant_id: split.tenantId,
          event_ids: JSON.stringify(split.eventIds),
          event_count: split.eventIds.length,
          oldest_event_at: split.oldestEventAt,
          attempts: split.attempts,
          next_attempt_at: split.nextAt,
          locked_until: null,
          locked_by: null,
          created_at: w.at,
        });
      if (w.ok === undefined) continue;
      const s = byWebhook.get(w.webhookId) ?? { lastOk: w.ok, failSince: null, at: w.at, gone: false };
      if (w.ok) Object.assign(s, { lastOk: true, failSince: null, at: w.at });
      else Object.assign(s, { lastOk: false, failSince: s.failSince ?? w.at, at: w.at, gone: s.gone || !!w.gone });
      byWebhook.set(w.webhookId, s);
    }
    await insertMany(trx, 'webhook_queue', splits);
    await insertMany(
      trx,
      'webhook_deliveries',
      writes.flatMap((w) => (w.log ? [w.log] : [])),
    );
    // In id order: nodes flushing outcomes of the same webhooks at once must lock the webhooks
    // rows in one order, else PostgreSQL detects a deadlock (seen in test/cluster) and the flush
    // is retried after a wasted second.
    const ordered = [...byWebhook].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    for (const [id, s] of ordered) {
      if (s.lastOk) {
        await runSql(trx, SQL.webhookSucceeded, [s.at, id]);
        continue;
      }
      await trx
        .updateTable('webhooks')
        .set((eb) => ({ failing_since: eb.fn.coalesce('failing_since', eb.val(s.failSince)), last_failure_at: s.at }))
        .where('id', '=', id)
        .execute();
      if (s.gone) {
        const reason = 'the endpoint answered 410 Gone';
        if (await disableWebhook(trx, id, reason, s.at)) disabled.push({ id, reason });
        continue;
      }
      const row = await trx.selectFrom('webhooks').select('failing_since').where('id', '=', id).executeTakeFirst();
      if (row?.failing_since && row.failing_since <= disableBefore) {
        const reason = 'every delivery attempt failed for 5 days';
        if (await disableWebhook(trx, id, reason, s.at)) disabled.push({ id, reason });
      }
    }
  });
  return disabled;
}
