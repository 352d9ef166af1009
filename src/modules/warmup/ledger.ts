import { sql } from 'kysely';
import type { Executor } from '../../db/executor.ts';
import type { Clock } from '../../lib/clock.ts';
import type { WarmupStage } from './warmup.schema.ts';

/**
 * Warmup accounting in the database (docs/ip-pools.md "Warmup"): never process memory, so the
 * caps hold however many nodes send from one address (PostgreSQL) and survive restarts.
 *
 * - A send takes a slot first: one atomic upsert on warmup_counters that increments only below
 *   the limit (`on conflict ... do update ... where sent < limit returning sent`). No row back =
 *   the period is full. Two nodes racing for the last slot: the row lock (PostgreSQL) or the
 *   single writer (SQLite) lets exactly one through. An hourly limit is a second counter; if it
 *   refuses, the daily slot is given back.
 * - A slot is taken before the connection is made, so a message that then is not sent (a dropped
 *   connection, a worker stopping) still counts: the count can only over-state what went out,
 *   so the cap itself is never passed.
 * - Warmup days: warmup_progress keeps, per address, its warmup day and the UTC date that day was
 *   set on. The first send of a new UTC date looks at the previous date's counters: sent > 0 and
 *   bounces/sent and complaints/sent at most the policy's thresholds -> the next warmup day;
 *   otherwise the address stays on its stage. The move is a compare-and-set on the old date, so
 *   one node makes it.
 * - Bounces and complaints are counted on the day they are learnt (sync bounces at once, async
 *   ones and complaints when the report arrives), against that day's sends.
 */

export interface WarmupPolicyRules {
  id: string;
  stages: WarmupStage[];
  maxBounceRate: number;
  maxComplaintRate: number;
}

export type Reservation = { ok: true } | { ok: false; retryAtMs: number };

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const utcHour = (ms: number) => new Date(ms).toISOString().slice(0, 13);
const nextDayMs = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS + DAY_MS;
const nextHourMs = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS + HOUR_MS;

/** The stage for a warmup day: the last one starting on or before it; null once past the last stage. */
export function stageFor(stages: readonly WarmupStage[], warmupDay: number): WarmupStage | null {
  const last = stages[stages.length - 1];
  if (!last || warmupDay > last.day) return null;
  let at: WarmupStage | null = null;
  for (const s of stages) if (s.day <= warmupDay) at = s;
  return at;
}

/** Takes one slot of `period` if fewer than `limit` are taken; true when it did. */
async function take(db: Executor, address: string, period: string, limit: number): Promise<boolean> {
  const row = await db
    .insertInto('warmup_counters')
    .values({ address, period, sent: 1, bounced: 0, complained: 0 })
    .onConflict((oc) =>
      oc
        .columns(['address', 'period'])
        .doUpdateSet({ sent: sql`warmup_counters.sent + 1` })
        .where('warmup_counters.sent', '<', limit),
    )
    .returning('sent')
    .executeTakeFirst();
  return row !== undefined;
}

async function giveBack(db: Executor, address: string, period: string): Promise<void> {
  await db
    .updateTable('warmup_counters')
    .set({ sent: sql`sent - 1` })
    .where('address', '=', address)
    .where('period', '=', period)
    .where('sent', '>', 0)
    .execute();
}

export class WarmupLedger {
  /** address -> its warmup day for one UTC date (only changes when the date does). */
  private readonly days = new Map<string, { day: string; warmupDay: number }>();

  constructor(
    private readonly db: Executor,
    readonly clock: Clock,
  ) {}

  /** The address's warmup day today, moving it on (once, across nodes) when yesterday was clean. */
  async warmupDay(address: string, policy: WarmupPolicyRules, nowMs = this.clock.now()): Promise<number> {
    const today = utcDay(nowMs);
    const hit = this.days.get(address);
    if (hit?.day === today) return hit.warmupDay;
    for (let tries = 0; tries < 5; tries++) {
      const row = await this.db
        .selectFrom('warmup_progress')
        .select(['warmup_day', 'day'])
        .where('address', '=', address)
        .executeTakeFirst();
      if (!row) {
        await this.db
          .insertInto('warmup_progress')
          .values({ address, warmup_day: 1, day: today })
          .onConflict((oc) => oc.column('address').doNothing())
          .execute();
        continue;
      }
      if (row.day >= today) {
        this.days.set(address, { day: today, warmupDay: row.warmup_day });
        return row.warmup_day;
      }
      const next = (await this.dayWasClean(address, row.day, policy)) ? row.warmup_day + 1 : row.warmup_day;
      await this.db
        .updateTable('warmup_progress')
        .set({ warmup_day: next, day: today })
        .where('address', '=', address)
        .where('day', '=', row.day)
        .execute();
    }
    throw new Error(`warmup progress of ${address} could not be read`);
  }

  private async dayWasClean(address: string, day: string, policy: WarmupPolicyRules): Promise<boolean> {
    const c = await this.db
      .selectFrom('warmup_counters')
      .select(['sent', 'bounced', 'complained'])
      .where('address', '=', address)
      .where('period', '=', `d:${day}`)
      .executeTakeFirst();
    if (!c || Number(c.sent) === 0) return false;
    const sent = Number(c.sent);
    return Number(c.bounced) / sent <= policy.maxBounceRate && Number(c.complained) / sent <= policy.maxComplaintRate;
  }

  /** Takes a slot for one message from `address`, or says when the next slot opens. */
  async reserve(address: string, policy: WarmupPolicyRules): Promise<Reservation> {
    const now = this.clock.now();
    const stage = stageFor(policy.stages, await this.warmupDay(address, policy, now));
    if (!stage) return { ok: true }; // past the last stage: warmed up
    const dayPeriod = `d:${utcDay(now)}`;
    if (!(await take(this.db, address, dayPeriod, stage.daily_limit))) return { ok: false, retryAtMs: nextDayMs(now) };
    if (stage.hourly_limit !== null && !(await take(this.db, address, `h:${utcHour(now)}`, stage.hourly_limit))) {
      await giveBack(this.db, address, dayPeriod);
      return { ok: false, retryAtMs: nextHourMs(now) };
    }
    return { ok: true };
  }
}

/**
 * Counts a bounce or complaint of a message sent from `address` against today's sends there
 * (only addresses in warmup have a counter row for today; others are left alone).
 */
export async function countWarmupFeedback(
  db: Executor,
  address: string | null | undefined,
  kind: 'bounced' | 'complained',
  nowMs: number,
): Promise<void> {
  if (!address) return;
  await db
    .updateTable('warmup_counters')
    .set(kind === 'bounced' ? { bounced: sql`bounced + 1` } : { complained: sql`complained + 1` })
    .where('address', '=', address)
    .where('period', '=', `d:${utcDay(nowMs)}`)
    .execute();
}

/** Per address: today's warmup day, stage and counts (dashboard, docs/ip-pools.md). */
export async function warmupStatus(db: Executor, addresses: readonly string[], nowMs: number) {
  if (addresses.length === 0) return [];
  const day = utcDay(nowMs);
  const [progress, counters] = await Promise.all([
    db.selectFrom('warmup_progress').selectAll().where('address', 'in', addresses).execute(),
    db
      .selectFrom('warmup_counters')
      .selectAll()
      .where('address', 'in', addresses)
      .where('period', 'in', [`d:${day}`, `h:${utcHour(nowMs)}`])
      .execute(),
  ]);
  return addresses.map((address) => {
    const p = progress.find((r) => r.address === address);
    const d = counters.find((r) => r.address === address && r.period.startsWith('d:'));
    const h = counters.find((r) => r.address === address && r.period.startsWith('h:'));
    return {
      address,
      // Not started yet, or last moved on an earlier date (moves on its next send).
      warmup_day: p ? p.warmup_day : 1,
      progress_day: p?.day ?? null,
      sent_today: Number(d?.sent ?? 0),
      bounced_today: Number(d?.bounced ?? 0),
      complained_today: Number(d?.complained ?? 0),
      sent_this_hour: Number(h?.sent ?? 0),
    };
  });
}
