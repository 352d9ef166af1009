/**
 * A transmission's link table (docs/tracking.md "Tokens", migration 018): the distinct URLs its
 * html tracks, numbered in order of first appearance. Written at accept in the transmission's
 * transaction (one multi-row insert, or the group commit's shared one); read once per
 * transmission by the delivery worker (the render plan maps each URL to its number, which the
 * version 2 click token carries) and, for a click, the one row its token names.
 */
import { insertMany } from '../../db/batch.ts';
import type { Executor } from '../../db/executor.ts';
import type { TrackingLinksTable } from '../../db/schema.ts';
import type { Pacer } from '../../lib/pacer.ts';
import { trackedLinks } from './rewrite.ts';

/**
 * Stores the links of an accepted transmission whose clicks are tracked. Nothing for mail kept
 * as submitted (SMTP: its links are not rewritten) or without html.
 */
export async function insertTransmissionLinks(
  trx: Executor,
  tx: { tenantId: string; transmissionId: string; html: string | null; clickTracking: boolean; raw: boolean },
  pace?: Pacer,
): Promise<number> {
  if (!tx.clickTracking || tx.raw || !tx.html) return 0;
  const rows: TrackingLinksTable[] = trackedLinks(tx.html).map((url, idx) => ({
    tenant_id: tx.tenantId,
    transmission_id: tx.transmissionId,
    idx,
    url,
  }));
  await insertMany(trx, 'tracking_links', rows, pace);
  return rows.length;
}

/** The transmission's link URLs, index = idx (the delivery worker's render plan). */
export async function loadTransmissionLinks(db: Executor, tenantId: string, transmissionId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('tracking_links')
    .select(['idx', 'url'])
    .where('tenant_id', '=', tenantId)
    .where('transmission_id', '=', transmissionId)
    .orderBy('idx')
    .execute();
  const urls: string[] = [];
  for (const r of rows) urls[r.idx] = r.url;
  return urls;
}

/** The URL of row `idx` of the tenant's transmission, if there is one. */
export async function linkUrl(
  db: Executor,
  tenantId: string,
  transmissionId: string,
  idx: number,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('tracking_links')
    .select('url')
    .where('transmission_id', '=', transmissionId)
    .where('idx', '=', idx)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row?.url;
}
