import { runSql } from '../../db/dialect.ts';
import type { Executor } from '../../db/executor.ts';
import type { Database } from '../../db/index.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { isoAt } from '../../lib/clock.ts';
import { CLAIM_BY_DUE_TIME, NEXT_DUE, RELEASE } from '../outcomes/queue.sql.ts';
import { loadTransmissionLinks } from '../tracking/links.ts';

/**
 * The delivery queue is the messages table itself (no second queue to lose); its statements are
 * in src/modules/outcomes/queue.sql.ts. A claim moves due rows to `sending` and pushes
 * next_attempt_at to the lease's end; a crashed worker's messages are taken over from
 * messages_leased once the lease expires (fair-claim.ts), never lost.
 * This is the old FIFO claim by due time, kept for bench/fair-claim.ts to compare against; the
 * worker claims with FairClaimer. It reads the partial index messages_waiting in due order
 * (migration 020) and takes waiting rows only.
 */
export async function claimDueMessages(
  database: Database,
  workerId: string,
  limit: number,
  leaseMs: number,
  nowMs: number = Date.now(),
): Promise<MessagesTable[]> {
  const now = isoAt(nowMs);
  const until = isoAt(nowMs + leaseMs);
  return runSql<MessagesTable>(database.db, CLAIM_BY_DUE_TIME, [until, workerId, now, limit]);
}

/**
 * Puts messages this worker claimed but did not send back in the queue, due at `nowMs` (at once
 * by default, as a lease running out would make them) and with no attempt counted, in one
 * statement. Rows another worker has taken meanwhile are left alone.
 */
export async function releaseMessages(
  database: Database,
  workerId: string,
  ids: readonly string[],
  nowMs: number = Date.now(),
): Promise<void> {
  if (ids.length === 0) return;
  // Sorted, so concurrent statements on PostgreSQL lock rows in one order.
  await runSql(database.db, RELEASE, [isoAt(nowMs), workerId, [...ids].sort()]);
}

/**
 * Earliest time a claim could take something (to sleep until then), or null: the first waiting
 * message's due time or the first lease's end.
 */
export async function nextDueAt(db: Executor): Promise<string | null> {
  const [row] = await runSql<{ waiting: string | null; leased: string | null }>(db, NEXT_DUE, []);
  const at = [row?.waiting, row?.leased].filter((x): x is string => typeof x === 'string').sort();
  return at[0] ?? null;
}

/**
 * A transmission as delivery loads it (once per transmission per worker), with its link table
 * when its clicks are tracked: the render plan turns each URL into a version 2 click token
 * (tracking/links.ts, render/renderer.ts forDelivery).
 */
export type DeliveryTransmission = NonNullable<Awaited<ReturnType<typeof loadTransmission>>>;

/** Transmissions per statement in loadTransmissions (bound parameters stay far below any limit). */
const LOAD_CHUNK = 200;

/**
 * loadTransmission for every distinct transmission of a claimed batch, in one statement per
 * tenant (chunks of LOAD_CHUNK), and the link tables of the click-tracked ones in one more. The
 * worker used to load them one by one, each a round trip the rest of the batch waited for: on
 * PostgreSQL a claim of 200 messages of 200 transmissions was 200 sequential statements.
 */
export async function loadTransmissions(
  db: Executor,
  refs: readonly { tenant_id: string; transmission_id: string }[],
): Promise<Map<string, DeliveryTransmission>> {
  const byTenant = new Map<string, Set<string>>();
  for (const r of refs) {
    let ids = byTenant.get(r.tenant_id);
    if (!ids) byTenant.set(r.tenant_id, (ids = new Set()));
    ids.add(r.transmission_id);
  }
  const out = new Map<string, DeliveryTransmission>();
  for (const [tenantId, idSet] of byTenant) {
    const ids = [...idSet];
    for (let i = 0; i < ids.length; i += LOAD_CHUNK) {
      const rows = await db
        .selectFrom('transmissions')
        .select(TRANSMISSION_COLUMNS)
        .where('tenant_id', '=', tenantId)
        .where('id', 'in', ids.slice(i, i + LOAD_CHUNK))
        .execute();
      const tracked = rows.filter(clicksTracked).map((r) => r.id);
      const links = tracked.length ? await loadLinksOf(db, tenantId, tracked) : new Map<string, string[]>();
      for (const row of rows) {
        out.set(row.id, { ...row, tracking_links: clicksTracked(row) ? (links.get(row.id) ?? []) : null });
      }
    }
  }
  return out;
}

/** What delivery reads of a transmission (loadTransmissions and loadTransmission alike). */
const TRANSMISSION_COLUMNS = [
  'id',
  'tenant_id',
  'content',
  'raw_message',
  'options',
  'mail_type',
  'tags',
  'created_at',
  'total_accepted',
] as const;

function clicksTracked(row: { raw_message: string | null; options: string }): boolean {
  return row.raw_message === null && (JSON.parse(row.options) as { click_tracking?: unknown }).click_tracking === true;
}

/** The link tables of several transmissions of one tenant: transmission id -> URLs by index. */
async function loadLinksOf(db: Executor, tenantId: string, transmissionIds: string[]): Promise<Map<string, string[]>> {
  const rows = await db
    .selectFrom('tracking_links')
    .select(['transmission_id', 'idx', 'url'])
    .where('tenant_id', '=', tenantId)
    .where('transmission_id', 'in', transmissionIds)
    .execute();
  const out = new Map<string, string[]>();
  for (const id of transmissionIds) out.set(id, []);
  for (const r of rows) (out.get(r.transmission_id) as string[])[r.idx] = r.url;
  return out;
}

export async function loadTransmission(db: Executor, tenantId: string, id: string) {
  const row = await db
    .selectFrom('transmissions')
    .select(TRANSMISSION_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) return undefined;
  return { ...row, tracking_links: clicksTracked(row) ? await loadTransmissionLinks(db, tenantId, id) : null };
}
