import type { Logger } from 'pino';
import type { Executor } from '../db/executor.ts';
import type { Database } from '../db/index.ts';
import { isOneHostDatabase } from '../db/dialect.ts';
import type { NodesTable } from '../db/schema.ts';
import { isoAt } from '../lib/clock.ts';
import type { NodeSelf } from '../lib/node-identity.ts';

/** What releasing a run's claims gave back, per kind of claim. */
export interface Released {
  messages: number;
  idempotencyKeys: number;
  webhookUnits: number;
  leases: number;
}

/** Gives back everything one run of a node held (src/release-claims.ts), inside `db`'s transaction. */
export type ReleaseClaims = (db: Executor, holder: string) => Promise<Released>;

export interface MembershipOptions {
  database: Database;
  /** Gives back a dead (or stopping) run's claims: it knows every queue, so the caller hands it in. */
  releaseClaims: ReleaseClaims;
  self: NodeSelf;
  logger: Logger;
  /** How often this node writes its heartbeat and looks at the others'. */
  heartbeatMs: number;
  /** A run whose heartbeat has not changed for this long is dead: its claims are taken over. */
  timeoutMs: number;
}

/**
 * The `nodes` table: one row per running process (a run of a node), with a heartbeat. It lets
 * claims (messages in `sending`, Idempotency-Key claims, webhook units, job leases) come back as
 * soon as their holder is known dead, instead of when each claim's own lease runs out:
 * - on start, the runs this node can prove dead (see diedBefore) are released at once: a node
 *   restarted after kill -9 takes its own claims back before it serves or claims anything;
 * - every heartbeat, the runs whose heartbeat value has not changed for `timeoutMs` are released
 *   by whichever live node sees it first (one of them: the row is deleted in the same
 *   transaction, conditionally on the heartbeat it saw).
 * Staleness is measured on this node's own clock, by how long a row's heartbeat value has stayed
 * the same, so clocks that differ between nodes cannot make a live node look dead.
 */
export class NodeMembership {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  /** Other runs' last heartbeat value, and when (this node's monotonic clock) it was first seen. */
  private readonly seen = new Map<string, { beat: string; since: number }>();

  constructor(private readonly o: MembershipOptions) {}

  /** Registers this run, releases the runs that died before it, starts the heartbeat. */
  async join(): Promise<void> {
    const { database, self } = this.o;
    await this.register();
    const rows = await database.db.selectFrom('nodes').selectAll().execute();
    for (const row of rows) {
      if (row.id !== self.holder && diedBefore(row, self, isOneHostDatabase(database)))
        await this.reap(row, 'previous run');
    }
    this.timer = setInterval(() => {
      if (!this.ticking) this.ticking = this.tick().finally(() => (this.ticking = null));
    }, this.o.heartbeatMs);
    this.timer.unref();
  }

  /** Stops the heartbeat and leaves: whatever this run still holds is given back, its row removed. */
  async leave(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    const { database, self } = this.o;
    await database.db.transaction().execute(async (trx) => {
      await this.o.releaseClaims(trx, self.holder);
      await trx.deleteFrom('nodes').where('id', '=', self.holder).execute();
    });
  }

  /** This run's row in `nodes`, with a fresh heartbeat. */
  private async register(): Promise<void> {
    const { database, self } = this.o;
    const now = isoAt(Date.now());
    await database.db
      .insertInto('nodes')
      .values({
        id: self.holder,
        node_id: self.nodeId,
        host: self.host,
        pid: self.pid,
        started_at: now,
        heartbeat_at: now,
      })
      .execute();
  }

  private async tick(): Promise<void> {
    try {
      await this.beat();
      await this.reapSilent();
    } catch (err) {
      this.o.logger.error({ err }, 'node heartbeat failed');
    }
  }

  private async beat(): Promise<void> {
    const { database, self } = this.o;
    const res = await database.db
      .updateTable('nodes')
      .set({ heartbeat_at: isoAt(Date.now()) })
      .where('id', '=', self.holder)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 1) return;
    // Another node took this one for dead (no heartbeat for timeoutMs: a stalled process or
    // database) and released its claims; what this run still sends may go out twice.
    this.o.logger.error({ holder: self.holder }, 'this node was taken for dead and its claims released; rejoining');
    await this.register();
  }

  private async reapSilent(): Promise<void> {
    const rows = await this.o.database.db.selectFrom('nodes').selectAll().execute();
    const now = performance.now();
    const present = new Set<string>();
    for (const row of rows) {
      if (row.id === this.o.self.holder) continue;
      present.add(row.id);
      const last = this.seen.get(row.id);
      if (!last || last.beat !== row.heartbeat_at) {
        this.seen.set(row.id, { beat: row.heartbeat_at, since: now });
        continue;
      }
      if (now - last.since >= this.o.timeoutMs) await this.reap(row, 'heartbeat stopped');
    }
    for (const id of this.seen.keys()) if (!present.has(id)) this.seen.delete(id);
  }

  /** Deletes the run's row (only if its heartbeat is still the one we judged by) and frees its claims. */
  private async reap(row: NodesTable, why: string): Promise<void> {
    const released = await this.o.database.db.transaction().execute(async (trx): Promise<Released | null> => {
      const gone = await trx
        .deleteFrom('nodes')
        .where('id', '=', row.id)
        .where('heartbeat_at', '=', row.heartbeat_at)
        .executeTakeFirst();
      if (Number(gone.numDeletedRows) !== 1) return null;
      return this.o.releaseClaims(trx, row.id);
    });
    this.seen.delete(row.id);
    if (released)
      this.o.logger.warn(
        { dead: row.id, lastHeartbeat: row.heartbeat_at, why, released },
        'claims of a dead node released',
      );
  }
}

/**
 * Whether `row`, another run, is certainly dead as this run starts:
 * - a run of the same node id: yes, unless it is a live process on this host (two processes
 *   sharing one data dir or id must not release each other's claims). A run of this id on
 *   another host was this node before it moved: node ids are unique per node (docs/operations.md);
 * - with a database on one host (SQLite: one data file, `oneHostDatabase`) also a run of any id
 *   whose process is gone from this host.
 * Runs that cannot be judged so are left to the heartbeat timeout.
 */
export function diedBefore(row: NodesTable, self: NodeSelf, oneHostDatabase: boolean): boolean {
  const sameId = row.node_id === self.nodeId;
  if (!sameId && !oneHostDatabase) return false;
  if (row.host !== self.host) return sameId;
  return row.pid === self.pid || !processAlive(row.pid);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
