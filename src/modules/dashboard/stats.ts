import { sql } from 'kysely';
import type { Executor } from '../../db/executor.ts';
import { isoAt } from '../../lib/clock.ts';
import { ENGAGEMENT, type EngagementName, IS_MACHINE } from '../events/engagement.ts';
import { uuidFloor } from '../../lib/ids.ts';

/** The overview's series: one per event type, named as the dashboard shows them. */
export const SERIES = {
  sent: 'message.accepted',
  delivered: 'message.delivered',
  deferred: 'message.deferred',
  bounced: 'message.bounced',
  complaints: 'message.complained',
  failed: 'message.failed',
  suppressed: 'message.suppressed',
} as const;
export type SeriesName = keyof typeof SERIES | EngagementName;

export const RANGES = {
  '24h': { hours: 24, bucket: 'hour' },
  '7d': { hours: 7 * 24, bucket: 'day' },
  '30d': { hours: 30 * 24, bucket: 'day' },
} as const;
export type RangeName = keyof typeof RANGES;

export type Counts = Record<SeriesName, number>;

export interface OverviewStats {
  range: RangeName;
  bucket: 'hour' | 'day';
  from: string;
  to: string;
  /** Oldest first, every bucket present (zeros included). `start` is the bucket's ISO start. */
  buckets: (Counts & { start: string })[];
  totals: Counts;
  /** delivered / (delivered + bounced + failed): the share of finished messages that arrived; null when none finished. */
  delivery_rate: number | null;
}

const HOUR = 3600_000;

function zero(): Counts {
  return {
    sent: 0,
    delivered: 0,
    deferred: 0,
    bounced: 0,
    complaints: 0,
    failed: 0,
    suppressed: 0,
    opens: 0,
    opens_machine: 0,
    clicks: 0,
    clicks_machine: 0,
  };
}

/** Bucket start (ms) of `ms`: the UTC hour or the UTC day. */
function floorTo(ms: number, bucket: 'hour' | 'day'): number {
  const size = bucket === 'hour' ? HOUR : 24 * HOUR;
  return Math.floor(ms / size) * size;
}

/**
 * Event counts per type and hour/day for the overview charts. Timestamps are fixed-width ISO
 * text on both backends, so the bucket is a prefix of created_at (13 chars = hour, 10 = day) and
 * one GROUP BY serves SQLite and PostgreSQL. The id bound lets the (tenant_id, type, id) index
 * seek to the window instead of walking the tenant's whole history.
 */
export async function overviewStats(
  db: Executor,
  tenantId: string,
  range: RangeName,
  now = Date.now(),
): Promise<OverviewStats> {
  const r = RANGES[range];
  const bucket = r.bucket;
  const end = floorTo(now, bucket) + (bucket === 'hour' ? HOUR : 24 * HOUR);
  const start = end - r.hours * HOUR;
  const from = isoAt(start);
  const prefix = sql.raw(bucket === 'hour' ? '13' : '10');
  const key = sql<string>`substr(created_at, 1, ${prefix})`;
  const byType = new Map<string, SeriesName>(Object.entries(SERIES).map(([name, type]) => [type, name as SeriesName]));
  const rows = await db
    .selectFrom('events')
    .select([key.as('b'), 'type', (eb) => eb.fn.countAll<number>().as('n')])
    .where('tenant_id', '=', tenantId)
    .where('type', 'in', [...byType.keys()])
    .where('id', '>=', uuidFloor(start))
    .where('created_at', '>=', from)
    .groupBy([key, 'type'])
    .execute();

  const size = bucket === 'hour' ? HOUR : 24 * HOUR;
  const buckets: (Counts & { start: string })[] = [];
  const index = new Map<string, Counts>();
  for (let t = start; t < end; t += size) {
    const iso = isoAt(t);
    const counts = zero();
    buckets.push(Object.assign(counts, { start: iso }));
    index.set(iso.slice(0, bucket === 'hour' ? 13 : 10), counts);
  }
  const engagement = await db
    .selectFrom('events')
    .select([key.as('b'), 'type', IS_MACHINE.as('m'), (eb) => eb.fn.countAll<number>().as('n')])
    .where('tenant_id', '=', tenantId)
    .where('type', 'in', Object.keys(ENGAGEMENT))
    .where('id', '>=', uuidFloor(start))
    .where('created_at', '>=', from)
    .groupBy([key, 'type', IS_MACHINE])
    .execute();
  const totals = zero();
  for (const row of engagement) {
    const names = ENGAGEMENT[row.type as keyof typeof ENGAGEMENT];
    const counts = index.get(row.b);
    if (!names || !counts) continue;
    const name = names[Number(row.m) === 1 ? 1 : 0];
    counts[name] += Number(row.n);
    totals[name] += Number(row.n);
  }
  for (const row of rows) {
    const name = byType.get(row.type);
    const counts = index.get(row.b);
    if (!name || !counts) continue;
    const n = Number(row.n);
    counts[name] += n;
    totals[name] += n;
  }
  const finished = totals.delivered + totals.bounced + totals.failed;
  return {
    range,
    bucket,
    from,
    to: isoAt(end),
    buckets,
    totals,
    delivery_rate: finished === 0 ? null : totals.delivered / finished,
  };
}
