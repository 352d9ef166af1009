import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { runSql } from '../../db/dialect.ts';
import type { Database } from '../../db/index.ts';

/**
 * Connection slots behind max_connections (docs/pacing.md "Connections across nodes"): an SMTP
 * session to a site x source address (x tenant scope, for a tenant override) holds one slot of its
 * bucket for as long as it lives. Taken once per session, not per message.
 *
 * PostgreSQL (several nodes): a slot is a row of pacing_connection_slots (migration 019), numbered
 * 0..max-1 per bucket, leased by one session of one node until `expires_at` (the database's clock,
 * so nodes' clocks do not matter). A node renews all its leases in one statement every
 * CONNECTION_RENEW_MS and deletes a lease when its session closes; a node that dies stops renewing
 * and its slots come back CONNECTION_LEASE_MS after its last renewal at most. The primary key
 * (bucket, slot) decides a race for one slot: the loser's upsert changes nothing and it tries
 * another free number.
 *
 * SQLite (one node): the same counts in memory.
 */
export const CONNECTION_LEASE_MS = 15_000;
/** Leases are renewed this often while their sessions live. */
export const CONNECTION_RENEW_MS = 5_000;

export interface SlotLease {
  readonly bucket: string;
  /** Set when this node found the lease gone (expired and taken): its session should end. */
  lost: boolean;
}

export interface ConnectionSlots {
  /** A slot of `bucket` when fewer than `max` are held (by every node on PostgreSQL); else null. */
  acquire(bucket: string, max: number): Promise<SlotLease | null>;
  release(lease: SlotLease): void;
  /** Slots of `bucket` this process holds: at `max`, a lane of its own ending frees the next. */
  heldHere(bucket: string): number;
  /** Releases whatever is still held and stops renewing. */
  close(): Promise<void>;
}

/** One node (SQLite): a counting semaphore per bucket. */
export class LocalSlots implements ConnectionSlots {
  private readonly used = new Map<string, number>();

  async acquire(bucket: string, max: number): Promise<SlotLease | null> {
    const n = this.used.get(bucket) ?? 0;
    if (n >= max) return null;
    this.used.set(bucket, n + 1);
    return { bucket, lost: false };
  }

  release(lease: SlotLease): void {
    const n = (this.used.get(lease.bucket) ?? 1) - 1;
    if (n <= 0) this.used.delete(lease.bucket);
    else this.used.set(lease.bucket, n);
  }

  heldHere(bucket: string): number {
    return this.used.get(bucket) ?? 0;
  }

  async close(): Promise<void> {}
}

const NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

/**
 * [bucket, max, holder, node, leaseMs] -> the slot taken (null: none) and the live leases the
 * statement saw (below max with no slot: another node won the race for that number). With k live leases (< max),
 * one of the numbers 0..k is free (k+1 numbers, k leases): a random free one, so two nodes
 * taking slots of one bucket at once seldom want the same. The live count also keeps a lowered
 * limit: leases above it just run out with their sessions.
 */
const ACQUIRE = `with t as (select ${NOW_MS} as now),
live as (select c.slot from pacing_connection_slots c, t where c.bucket = $1 and c.expires_at > t.now),
pick as (
  select s.n from generate_series(0, least((select count(*) from live)::int, $2::int - 1)) as s(n)
  where (select count(*) from live) < $2::int and s.n not in (select slot from live)
  order by random() limit 1
),
taken as (
  insert into pacing_connection_slots (bucket, slot, holder, node, expires_at)
  select $1, pick.n, $3, $4, t.now + $5::bigint from pick, t
  on conflict (bucket, slot) do update
    set holder = excluded.holder, node = excluded.node, expires_at = excluded.expires_at
    where pacing_connection_slots.expires_at <= excluded.expires_at - $5::bigint
  returning slot
)
select (select slot from taken) as slot, (select count(*) from live)::int as live`;

/** [node, leaseMs] -> the holders still leased (the others expired and may be someone else's). */
const RENEW = `update pacing_connection_slots set expires_at = ${NOW_MS} + $2::bigint where node = $1 returning holder`;

/** [bucket, slot, holder] */
const RELEASE = 'delete from pacing_connection_slots where bucket = $1 and slot = $2 and holder = $3';

/** Rows of dead nodes' sessions, an hour past their expiry (a later acquire reuses them anyway). */
const PRUNE = `delete from pacing_connection_slots where expires_at < ${NOW_MS} - 3600000`;

interface Held extends SlotLease {
  slot: number;
  holder: string;
  /** Date.now() when taken: a renewal that started before it cannot have seen it. */
  takenAt: number;
}

/** Every node (PostgreSQL): leases in pacing_connection_slots. */
export class DatabaseSlots implements ConnectionSlots {
  /** This process's leases: one renewal statement covers them all. */
  private readonly node: string;
  private readonly held = new Map<string, Held>();
  private readonly perBucket = new Map<string, number>();
  private seq = 0;
  private timer: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;
  private lastRenewed = Date.now();
  private ticks = 0;
  private readonly releasing = new Set<Promise<unknown>>();

  constructor(
    private readonly database: Database,
    workerId: string,
    private readonly logger: Logger,
    private readonly leaseMs = CONNECTION_LEASE_MS,
    private readonly renewMs = CONNECTION_RENEW_MS,
  ) {
    this.node = `${workerId}:${randomBytes(6).toString('hex')}`;
  }

  async acquire(bucket: string, max: number): Promise<SlotLease | null> {
    // This process alone holds them all: no need to ask (one of its lanes ending frees one).
    if (this.heldHere(bucket) >= max) return null;
    this.startRenewing();
    // A lost race for one number: try again, the winner's row now counts.
    for (let attempt = 0; attempt < 3; attempt++) {
      const holder = `${this.node}:${++this.seq}`;
      const takenAt = Date.now();
      let row: { slot: number | null; live: number } | undefined;
      try {
        [row] = await runSql<{ slot: number | null; live: number }>(this.database.db, ACQUIRE, [
          bucket,
          max,
          holder,
          this.node,
          this.leaseMs,
        ]);
      } catch (err) {
        this.logger.error({ err, bucket }, 'pacing: taking a connection slot failed');
        return null;
      }
      if (row && row.slot !== null) {
        const lease: Held = { bucket, lost: false, slot: Number(row.slot), holder, takenAt };
        this.held.set(holder, lease);
        this.perBucket.set(bucket, this.heldHere(bucket) + 1);
        return lease;
      }
      // Full (the statement saw max live leases), or a number lost to another node: try again.
      if (!row || Number(row.live) >= max) return null;
    }
    return null;
  }

  release(lease: SlotLease): void {
    const h = lease as Held;
    if (!this.held.delete(h.holder)) return;
    const n = this.heldHere(h.bucket) - 1;
    if (n <= 0) this.perBucket.delete(h.bucket);
    else this.perBucket.set(h.bucket, n);
    // Not awaited by the session (it is over either way; a failed delete expires in leaseMs);
    // close() waits for these.
    const p = runSql(this.database.db, RELEASE, [h.bucket, h.slot, h.holder])
      .catch((err) =>
        this.logger.warn({ err, bucket: h.bucket }, 'pacing: releasing a connection slot failed (it expires)'),
      )
      .finally(() => this.releasing.delete(p));
    this.releasing.add(p);
  }

  heldHere(bucket: string): number {
    return this.perBucket.get(bucket) ?? 0;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.renewing;
    for (const lease of [...this.held.values()]) this.release(lease);
    await Promise.all([...this.releasing]);
  }

  private startRenewing(): void {
    if (this.timer) return;
    this.lastRenewed = Date.now();
    this.timer = setInterval(() => {
      this.renewing ??= this.renew().finally(() => {
        this.renewing = null;
      });
    }, this.renewMs);
    this.timer.unref();
  }

  /** One statement renews every lease of this process; a lease it does not return is lost. */
  private async renew(): Promise<void> {
    this.ticks++;
    if (this.ticks % 60 === 0) await runSql(this.database.db, PRUNE, []).catch(() => {});
    if (this.held.size === 0) {
      this.lastRenewed = Date.now();
      return;
    }
    const started = Date.now();
    try {
      const rows = await runSql<{ holder: string }>(this.database.db, RENEW, [this.node, this.leaseMs]);
      const kept = new Set(rows.map((r) => r.holder));
      for (const h of this.held.values()) {
        if (h.takenAt < started && !kept.has(h.holder)) this.lose(h);
      }
      this.lastRenewed = started;
    } catch (err) {
      this.logger.error({ err }, 'pacing: renewing connection slots failed');
      // Unrenewed this long, the leases may have run out and been taken by other nodes.
      if (Date.now() - this.lastRenewed > this.leaseMs - this.renewMs) {
        for (const h of this.held.values()) this.lose(h);
      }
    }
  }

  private lose(h: Held): void {
    h.lost = true;
    this.logger.warn({ bucket: h.bucket, slot: h.slot }, 'pacing: a connection slot lease was lost; its session ends');
    this.release(h);
  }
}
