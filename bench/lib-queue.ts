/**
 * The queue the claim benches share (bench/fair-claim.ts, fair-claim-leases.ts, fair-claim-parts.ts):
 * `queued` messages over `tenants` tenants, skewed like real queues (tenant i holds about
 * 1/(i+1) of them), one in ten transactional, all due now, inserted directly (not through the
 * API: a million accepts would take the bench's whole time).
 */
import type { Container } from '../src/container.ts';
import { insertMany } from '../src/db/batch.ts';
import type { MessagesTable } from '../src/db/schema.ts';
import { newId } from '../src/lib/ids.ts';

export interface SkewedQueue {
  /** Tenant ids, as UUIDv7 would be (ascending: the walk's order). */
  tenants: string[];
  /** When every message is due. */
  now: string;
  /** Messages inserted. */
  made: number;
}

/** A message row as accepted, due at `now`, never tried. */
export function queuedRow(
  tenantId: string,
  transmissionId: string,
  recipient: string,
  now: string,
  priority?: number,
): MessagesTable {
  return {
    tenant_id: tenantId,
    id: newId(),
    transmission_id: transmissionId,
    recipient,
    recipient_name: null,
    recipient_domain: recipient.slice(recipient.indexOf('@') + 1),
    substitution_data: null,
    metadata: '{}',
    state: 'queued',
    attempt_count: 0,
    next_attempt_at: now,
    locked_until: null,
    locked_by: null,
    last_response: null,
    created_at: now,
    updated_at: now,
    ...(priority === undefined ? {} : { priority }),
  };
}

export async function queueSkewed(c: Container, queued: number, tenantCount: number): Promise<SkewedQueue> {
  const db = c.database.db;
  const base = await c.tenants.create({ name: 'bench', from: 'Shop <shop@bench.test>' });
  const txId = newId();
  const now = new Date().toISOString();
  await db
    .insertInto('transmissions')
    .values({
      tenant_id: base.tenant_id,
      id: txId,
      source: 'api',
      mail_type: 'marketing',
      tags: '[]',
      metadata: '{}',
      content: '{"subject":"x","text":"y"}',
      raw_message: null,
      options: '{}',
      total_accepted: 0,
      total_rejected: 0,
      start_time: null,
      created_at: now,
    } as never)
    .execute();
  const tenants = Array.from({ length: tenantCount }, () => newId());
  const total = tenants.reduce((a, _, i) => a + 1 / (i + 1), 0);
  let made = 0;
  let rows: MessagesTable[] = [];
  const flush = async () => {
    const part = rows;
    rows = [];
    await db.transaction().execute((trx) => insertMany(trx, 'messages', part));
  };
  for (let t = 0; t < tenantCount; t++) {
    const n = t === tenantCount - 1 ? queued - made : Math.max(1, Math.round(queued / (t + 1) / total));
    for (let i = 0; i < n && made < queued; i++, made++) {
      rows.push(queuedRow(tenants[t] as string, txId, `r${made}@dest.test`, now, i % 10 === 0 ? 0 : 1));
      if (rows.length >= 20_000) await flush();
    }
  }
  if (rows.length) await flush();
  return { tenants, now, made };
}
