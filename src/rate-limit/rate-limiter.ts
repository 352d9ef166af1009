import type { Redis } from 'ioredis';
import { dialectSql, runSql, sqliteFromNumbered } from '../db/dialect.ts';
import type { Database } from '../db/index.ts';
import { BoundedCache } from '../lib/bounded-cache.ts';

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
 * [key, burst - n, nowMs, burst, rps, n]: takes up to n tokens at once (n requests of one key that
 * waited together, see DatabaseStore) and returns the tokens left and, in last_allowed, how many
 * it granted. The cast: PostgreSQL would infer bigint for the rate and refuse a fractional one. A
 * denied take keeps the refilled level. updated_ms never moves back: nodes read their clocks
 * before waiting for the row lock, so takes commit out of clock order; setting an older time would
 * credit the same interval's refill twice and let several nodes together exceed the budget (found
 * by test/cluster).
 */
function takeSql(least: string, greatest: string, rows: string): string {
  const refilled = `${least}($4, rate_limit_buckets.tokens + ${greatest}(0, $3 - rate_limit_buckets.updated_ms) * CAST($5 AS double precision) / 1000.0)`;
  const granted = `CASE WHEN ${refilled} >= 1 THEN ${least}($6, FLOOR(${refilled})) ELSE 0 END`;
  return (
    `INSERT INTO rate_limit_buckets (key, tokens, updated_ms, last_allowed) ${rows} ` +
    `ON CONFLICT (key) DO UPDATE SET tokens = ${refilled} - ${granted}, last_allowed = ${granted}, ` +
    `updated_ms = ${greatest}(rate_limit_buckets.updated_ms, $3) RETURNING tokens, last_allowed`
  );
}

/**
 * PostgreSQL: the take commits without waiting for its WAL flush (`synchronous_commit` off for this
 * statement's own transaction only, set in the statement so it costs no extra round trip). Every
 * request of one API key updates the same row, so each take waited for the row lock of the one
 * before it, which was held through that one's WAL flush: one key's requests went through one
 * flush at a time (1,500-1,600 takes/s at most, p50 18 ms with 32 waiting; the soak's accepts
 * spent most of their time here). A crash of the database server can lose the last fraction of a
 * second of takes, which only leaves the bucket a little fuller: nothing a client sent is lost.
 */
const ASYNC_COMMIT_ROW =
  "SELECT $1, $2, $3, $6 FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";
const TAKE = dialectSql({
  postgres: takeSql('LEAST', 'GREATEST', ASYNC_COMMIT_ROW),
  ...sqliteFromNumbered(takeSql('MIN', 'MAX', 'VALUES ($1, $2, $3, $6)')),
});

type Taken = { allowed: boolean; tokens: number };
interface Waiter {
  p: BucketParams;
  resolve: (t: Taken) => void;
  reject: (err: unknown) => void;
}
/** Requests of one key that share one statement at most. */
const MAX_SHARED_TAKE = 1000;

/**
 * One atomic upsert per key at a time: requests of a key that arrive while its statement runs wait
 * and then share the next one, which takes their tokens together (granted in arrival order). On
 * PostgreSQL the row lock serialized them anyway, one statement each; sharing turns a queue of
 * statements into one (3,000 takes on one key, 32 at a time: see bench/accept.ts and
 * docs/benchmarks.md). The bucket is still counted in the database, so it holds across nodes.
 */
export class DatabaseStore implements RateLimitStore {
  readonly kind = 'database' as const;
  /** Keys with a statement running -> the requests waiting for the next one. */
  private readonly waiting = new Map<string, Waiter[]>();

  constructor(private readonly database: Database) {}

  async take(key: string, p: BucketParams, nowMs: number): Promise<Taken> {
    const queue = this.waiting.get(key);
    if (queue) return new Promise<Taken>((resolve, reject) => queue.push({ p, resolve, reject }));
    this.waiting.set(key, []);
    try {
      return (await this.takeMany(key, p, nowMs, 1))[0] as Taken;
    } finally {
      this.next(key);
    }
  }

  /** Runs the shared statement of the requests that waited behind the one that just finished. */
  private next(key: string): void {
    const queue = this.waiting.get(key) ?? [];
    if (queue.length === 0) {
      this.waiting.delete(key);
      return;
    }
    const batch = queue.splice(0, MAX_SHARED_TAKE);
    // The newest request's parameters: a key's limits changed while it waited apply from now on.
    const p = (batch.at(-1) as Waiter).p;
    this.takeMany(key, p, Date.now(), batch.length)
      .then(
        (results) => {
          for (const [i, r] of results.entries()) batch[i]?.resolve(r);
        },
        (err) => {
          for (const w of batch) w.reject(err);
        },
      )
      .finally(() => this.next(key));
  }

  /** Takes up to n tokens in one statement; the result of each of the n requests, in order. */
  private async takeMany(key: string, p: BucketParams, nowMs: number, n: number): Promise<Taken[]> {
    const firstGrant = Math.min(n, Math.floor(p.burst));
    const rows = await runSql<{ tokens: number; last_allowed: number }>(this.database.db, TAKE, [
      key,
      p.burst - firstGrant,
      nowMs,
      p.burst,
      p.rps,
      n,
    ]);
    const granted = Number(rows[0]?.last_allowed ?? 0);
    const left = Math.max(0, Number(rows[0]?.tokens ?? 0));
    // As if taken one by one: the i-th granted request saw the tokens the later grants then took.
    return Array.from({ length: n }, (_, i) =>
      i < granted ? { allowed: true, tokens: left + (granted - 1 - i) } : { allowed: false, tokens: left },
    );
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
