import type { Redis } from 'ioredis';
import { dialectSql, runSql, sqliteFromNumbered } from '../../db/dialect.ts';
import type { Database } from '../../db/index.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until one token is available (only meaningful when denied). */
  retryAfterSeconds: number;
}

export interface BucketParams {
  rps: number;
  burst: number;
}

export interface RateLimitStore {
  readonly kind: 'memory' | 'redis' | 'database';
  /** Takes one token from `key`'s bucket; returns tokens left (>= 0) or -1 when denied with the level. */
  take(key: string, p: BucketParams, nowMs: number): Promise<{ allowed: boolean; tokens: number }>;
  /** Tokens in `key`'s bucket now, without taking one (a bucket never used is full). */
  peek(key: string, p: BucketParams, nowMs: number): Promise<number>;
}

/**
 * Token bucket per API key: `burst` capacity refilled at `rps` tokens/s.
 * Stores: memory (single node, the SQLite default), Redis (REDIS_URL; holds across nodes) and
 * the database (PostgreSQL without Redis; one upsert per request, holds across nodes).
 */
export class RateLimiter {
  constructor(private readonly store: RateLimitStore) {}

  get kind() {
    return this.store.kind;
  }

  async check(key: string, p: BucketParams): Promise<RateDecision> {
    const { allowed, tokens } = await this.store.take(key, p, Date.now());
    const remaining = Math.max(0, Math.floor(tokens));
    return {
      allowed,
      limit: p.burst,
      remaining,
      resetSeconds: Math.ceil((p.burst - tokens) / p.rps),
      retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / p.rps)),
    };
  }

  /**
   * Whether `key`'s bucket holds a token, without taking it: for budgets of failures, which are
   * checked before an attempt and drawn from only when it fails.
   */
  async peek(key: string, p: BucketParams): Promise<{ available: boolean; retryAfterSeconds: number }> {
    const tokens = await this.store.peek(key, p, Date.now());
    return { available: tokens >= 1, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / p.rps)) };
  }
}

function refill(tokens: number, updatedMs: number, nowMs: number, p: BucketParams): number {
  return Math.min(p.burst, tokens + (Math.max(0, nowMs - updatedMs) * p.rps) / 1000);
}

export class MemoryStore implements RateLimitStore {
  readonly kind = 'memory' as const;
  /** Idle buckets are dropped first when full; a dropped bucket starts full again. */
  private readonly buckets = new BoundedCache<string, { tokens: number; updatedMs: number }>(100_000);

  async take(key: string, p: BucketParams, nowMs: number) {
    const b = this.buckets.get(key);
    let tokens = b ? refill(b.tokens, b.updatedMs, nowMs, p) : p.burst;
    const allowed = tokens >= 1;
    if (allowed) tokens -= 1;
    this.buckets.set(key, { tokens, updatedMs: nowMs });
    return { allowed, tokens };
  }

  async peek(key: string, p: BucketParams, nowMs: number) {
    const b = this.buckets.get(key);
    return b ? refill(b.tokens, b.updatedMs, nowMs, p) : p.burst;
  }
}

// Atomic in Redis: read, refill, take, write, in one script.
const REDIS_SCRIPT = `
local b = redis.call('HMGET', KEYS[1], 't', 'u')
local rps = tonumber(ARGV[1]); local burst = tonumber(ARGV[2]); local now = tonumber(ARGV[3])
local t = tonumber(b[1]); local u = tonumber(b[2])
if t == nil then t = burst; u = now end
t = math.min(burst, t + math.max(0, now - u) * rps / 1000)
local allowed = 0
if t >= 1 then t = t - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 't', tostring(t), 'u', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rps * 1000) + 1000)
return {allowed, tostring(t)}`;

export class RedisStore implements RateLimitStore {
  readonly kind = 'redis' as const;
  constructor(private readonly redis: Redis) {}

  async take(key: string, p: BucketParams, nowMs: number) {
    const res = (await this.redis.eval(REDIS_SCRIPT, 1, `postyard:rl:${key}`, p.rps, p.burst, nowMs)) as [
      number,
      string,
    ];
    return { allowed: res[0] === 1, tokens: Number(res[1]) };
  }

  async peek(key: string, p: BucketParams, nowMs: number) {
    const [t, u] = await this.redis.hmget(`postyard:rl:${key}`, 't', 'u');
    return t === null || u === null ? p.burst : refill(Number(t), Number(u), nowMs, p);
  }
}

/**
 * [key, burst - 1, nowMs, burst, rps]. The cast: PostgreSQL would infer bigint for the rate and
 * refuse a fractional one. A denied take keeps the refilled level; last_allowed tells the caller
 * which branch ran. updated_ms never moves back: nodes read their clocks before waiting for the
 * row lock, so takes commit out of clock order; setting an older time would credit the same
 * interval's refill twice and let several nodes together exceed the budget (found by test/cluster).
 */
function takeSql(least: string, greatest: string): string {
  const refilled = `${least}($4, rate_limit_buckets.tokens + ${greatest}(0, $3 - rate_limit_buckets.updated_ms) * CAST($5 AS double precision) / 1000.0)`;
  return (
    'INSERT INTO rate_limit_buckets (key, tokens, updated_ms, last_allowed) VALUES ($1, $2, $3, 1) ' +
    `ON CONFLICT (key) DO UPDATE SET tokens = CASE WHEN ${refilled} >= 1 THEN ${refilled} - 1 ELSE ${refilled} END, ` +
    `last_allowed = CASE WHEN ${refilled} >= 1 THEN 1 ELSE 0 END, ` +
    `updated_ms = ${greatest}(rate_limit_buckets.updated_ms, $3) RETURNING tokens, last_allowed`
  );
}
const TAKE = dialectSql({ postgres: takeSql('LEAST', 'GREATEST'), ...sqliteFromNumbered(takeSql('MIN', 'MAX')) });

/** One atomic upsert per request; PostgreSQL row locks serialize concurrent takes of one key. */
export class DatabaseStore implements RateLimitStore {
  readonly kind = 'database' as const;
  constructor(private readonly database: Database) {}

  async take(key: string, p: BucketParams, nowMs: number) {
    const rows = await runSql<{ tokens: number; last_allowed: number }>(this.database.db, TAKE, [
      key,
      p.burst - 1,
      nowMs,
      p.burst,
      p.rps,
    ]);
    const row = rows[0];
    return { allowed: Number(row?.last_allowed ?? 0) === 1, tokens: Math.max(0, Number(row?.tokens ?? 0)) };
  }

  async peek(key: string, p: BucketParams, nowMs: number) {
    const row = await this.database.db
      .selectFrom('rate_limit_buckets')
      .select(['tokens', 'updated_ms'])
      .where('key', '=', key)
      .executeTakeFirst();
    return row ? refill(Number(row.tokens), Number(row.updated_ms), nowMs, p) : p.burst;
  }
}
