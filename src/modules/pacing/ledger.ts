import { sql } from 'kysely';
import { dialectSql, runSql } from '../../db/dialect.ts';
import type { Database } from '../../db/index.ts';

/**
 * Counters behind messages_per_minute and messages_per_hour (docs/pacing.md "Limits across
 * nodes"). A grant is counted in a per-second slot (minute limit) and a per-minute slot (hour
 * limit) of its bucket (site x source address x scope) at the time it is granted.
 *
 * Window: a grant is good for GRANT_TTL_MS and a message takes time on the wire, so what the
 * receiver sees can lag the grant by a few seconds. Counting the last MINUTE_WINDOW_S = 65 s
 * (and 61 minutes for the hour) instead of exactly 60 keeps every 60-second window measured at
 * the receiver within the limit; the price is a steady rate 60/65 of the limit.
 *
 * PostgreSQL: the counts are rows of pacing_counts, read and written in one transaction under a
 * transaction-scoped advisory lock on the bucket, so grants on every node add up (the peers'
 * trackers are full of limits that overshoot by the number of processes). SQLite is one node: the
 * counts live in memory, the same arithmetic.
 */
export const MINUTE_WINDOW_S = 65;
export const HOUR_WINDOW_MIN = 61;
/** A grant not used within this long is dropped (still counted: never an overshoot). */
export const GRANT_TTL_MS = 2_000;

export interface RateLimits {
  perMinute: number;
  perHour: number;
}

export interface Grant {
  granted: number;
  /** When granted < wanted: ms until the oldest counted slot of the binding window leaves it. */
  retryInMs: number;
}

export interface RateLedger {
  take(bucket: string, wanted: number, limits: RateLimits, nowMs: number): Promise<Grant>;
}

function decide(
  wanted: number,
  limits: RateLimits,
  nowMs: number,
  minute: { used: number; oldest: number | null },
  hour: { used: number; oldest: number | null },
): Grant {
  const room = Math.min(limits.perMinute - minute.used, limits.perHour - hour.used);
  const granted = Math.max(0, Math.min(wanted, room));
  if (granted >= wanted) return { granted, retryInMs: 0 };
  const nowS = Math.floor(nowMs / 1000);
  let retry = 1000;
  if (limits.perMinute - minute.used <= 0 && minute.oldest !== null) {
    retry = Math.max(retry, (minute.oldest + MINUTE_WINDOW_S - nowS) * 1000);
  }
  if (limits.perHour - hour.used <= 0 && hour.oldest !== null) {
    retry = Math.max(retry, (hour.oldest + HOUR_WINDOW_MIN - Math.floor(nowS / 60)) * 60_000);
  }
  return { granted, retryInMs: retry };
}

/** One node (SQLite): per-bucket slot counts in memory. */
export class MemoryLedger implements RateLedger {
  private readonly seconds = new Map<string, Map<number, number>>();
  private readonly minutes = new Map<string, Map<number, number>>();

  async take(bucket: string, wanted: number, limits: RateLimits, nowMs: number): Promise<Grant> {
    const nowS = Math.floor(nowMs / 1000);
    const nowM = Math.floor(nowS / 60);
    const sec = this.window(this.seconds, bucket, nowS - MINUTE_WINDOW_S);
    const min = this.window(this.minutes, bucket, nowM - HOUR_WINDOW_MIN);
    const g = decide(wanted, limits, nowMs, sec, min);
    if (g.granted > 0) {
      const s = this.seconds.get(bucket) as Map<number, number>;
      s.set(nowS, (s.get(nowS) ?? 0) + g.granted);
      const m = this.minutes.get(bucket) as Map<number, number>;
      m.set(nowM, (m.get(nowM) ?? 0) + g.granted);
    }
    return g;
  }

  /** Drops slots at or before `after` and sums the rest. */
  private window(all: Map<string, Map<number, number>>, bucket: string, after: number) {
    let slots = all.get(bucket);
    if (!slots) {
      slots = new Map();
      all.set(bucket, slots);
    }
    let used = 0;
    let oldest: number | null = null;
    for (const [slot, n] of slots) {
      if (slot <= after) slots.delete(slot);
      else {
        used += n;
        if (oldest === null || slot < oldest) oldest = slot;
      }
    }
    return { used, oldest };
  }
}

/** [bucket, after] -> used, oldest */
const SUM = dialectSql({
  sqlite: 'select coalesce(sum(n), 0) as used, min(slot) as oldest from pacing_counts where bucket = ? and slot > ?',
  postgres:
    'select coalesce(sum(n), 0)::int as used, min(slot)::bigint as oldest from pacing_counts where bucket = $1 and slot > $2',
});

/** [bucket, slot, n] */
const ADD = dialectSql({
  sqlite:
    'insert into pacing_counts (bucket, slot, n) values (?, ?, ?) on conflict (bucket, slot) do update set n = pacing_counts.n + excluded.n',
  postgres:
    'insert into pacing_counts (bucket, slot, n) values ($1, $2, $3) on conflict (bucket, slot) do update set n = pacing_counts.n + excluded.n',
});

/** [bucket, before] */
const PRUNE = dialectSql({
  sqlite: 'delete from pacing_counts where bucket = ? and slot <= ?',
  postgres: 'delete from pacing_counts where bucket = $1 and slot <= $2',
});

/** Every node (PostgreSQL): pacing_counts rows under an advisory lock per bucket. */
export class DatabaseLedger implements RateLedger {
  constructor(private readonly database: Database) {}

  async take(bucket: string, wanted: number, limits: RateLimits, nowMs: number): Promise<Grant> {
    const nowS = Math.floor(nowMs / 1000);
    const nowM = Math.floor(nowS / 60);
    const sBucket = `s|${bucket}`;
    const mBucket = `m|${bucket}`;
    return this.database.db.transaction().execute(async (trx) => {
      // Serialises the read-then-add of this bucket across every node, until commit.
      await sql`select pg_advisory_xact_lock(hashtextextended(${bucket}, 18))`.execute(trx);
      const [sec] = await runSql<{ used: number; oldest: string | null }>(trx, SUM, [sBucket, nowS - MINUTE_WINDOW_S]);
      const [min] = await runSql<{ used: number; oldest: string | null }>(trx, SUM, [mBucket, nowM - HOUR_WINDOW_MIN]);
      const g = decide(
        wanted,
        limits,
        nowMs,
        { used: Number(sec?.used ?? 0), oldest: sec?.oldest == null ? null : Number(sec.oldest) },
        { used: Number(min?.used ?? 0), oldest: min?.oldest == null ? null : Number(min.oldest) },
      );
      if (g.granted > 0) {
        await runSql(trx, ADD, [sBucket, nowS, g.granted]);
        await runSql(trx, ADD, [mBucket, nowM, g.granted]);
      }
      // Old slots go with the bucket's own traffic: no sweeper needed.
      if (nowS % 10 === 0) {
        await runSql(trx, PRUNE, [sBucket, nowS - MINUTE_WINDOW_S]);
        await runSql(trx, PRUNE, [mBucket, nowM - HOUR_WINDOW_MIN]);
      }
      return g;
    });
  }
}
