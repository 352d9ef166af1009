import { sql } from 'kysely';
import type { Executor } from '../../db/executor.ts';

/**
 * Opens and clicks, counted apart for people and machines (`data.machine`, tracking/machine.ts):
 * `opens`/`clicks` are people, `opens_machine`/`clicks_machine` privacy proxies and scanners.
 */
export const ENGAGEMENT = {
  'message.opened': ['opens', 'opens_machine'],
  'message.clicked': ['clicks', 'clicks_machine'],
} as const;
export type EngagementName = (typeof ENGAGEMENT)[keyof typeof ENGAGEMENT][number];

/**
 * True when an event's data says machine. `data` is JSON.stringify output, where a quote inside a
 * string value is always escaped, so this text can only be the key itself: one LIKE on both
 * backends, no JSON functions (which differ between SQLite and PostgreSQL).
 */
export const IS_MACHINE = sql<number>`case when data like '%"machine":true%' then 1 else 0 end`;

export interface Engagement {
  opens: { people: number; machines: number };
  clicks: { people: number; machines: number };
}

/** One message's opens and clicks, people and machines apart (the dashboard's message page). */
export async function messageEngagement(db: Executor, tenantId: string, messageId: string): Promise<Engagement> {
  const rows = await db
    .selectFrom('events')
    .select(['type', IS_MACHINE.as('m'), (eb) => eb.fn.countAll<number>().as('n')])
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .where('type', 'in', Object.keys(ENGAGEMENT))
    .groupBy(['type', IS_MACHINE])
    .execute();
  const out: Engagement = { opens: { people: 0, machines: 0 }, clicks: { people: 0, machines: 0 } };
  for (const r of rows) {
    const into = r.type === 'message.opened' ? out.opens : out.clicks;
    if (Number(r.m) === 1) into.machines += Number(r.n);
    else into.people += Number(r.n);
  }
  return out;
}
