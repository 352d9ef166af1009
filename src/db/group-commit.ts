import type { Transaction } from 'kysely';
import type { Database } from './index.ts';
import { isPostgres } from './dialect.ts';
import type { DB } from './schema.ts';

type Work<T> = (trx: Transaction<DB>) => Promise<T>;

interface Pending {
  work: Work<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface GroupCommitOptions {
  /** Most units of work per shared transaction; default 128. */
  maxBatch?: number;
  /** How long the first unit waits for company, in ms; 0 (default) = until the current I/O phase ends. */
  delayMs?: number;
}

/**
 * Group commit for SQLite. SQLite has one writer, so concurrent accepts queue behind each
 * other's BEGIN/COMMIT; running the units that arrive within `delayMs` in one transaction turns
 * N commits into one. Each caller is answered only after the commit that holds its work, so
 * "accepted means durably stored" is unchanged.
 *
 * If any unit throws, the shared transaction rolls back and every unit of that batch runs again
 * alone in its own transaction: one failing unit never fails its neighbours, and units must
 * therefore be pure database work (safe to run twice when the first run was rolled back).
 *
 * PostgreSQL runs transactions concurrently on its pool, where grouping would serialize them on
 * one connection: there `run` is simply one transaction per unit.
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  private draining = false;
  private readonly grouped: boolean;
  private readonly maxBatch: number;
  private readonly delayMs: number;

  constructor(
    private readonly database: Database,
    opts: GroupCommitOptions = {},
  ) {
    this.grouped = !isPostgres(database);
    this.maxBatch = opts.maxBatch ?? 128;
    this.delayMs = opts.delayMs ?? 0;
  }

  /** Runs `work` in a transaction (possibly shared); resolves after that transaction commits. */
  run = <T>(work: Work<T>): Promise<T> => {
    if (!this.grouped) return this.database.db.transaction().execute(work);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (v: unknown) => void, reject });
      // setImmediate gathers every request parsed in this event-loop turn without idling the
      // process on a timer; a positive delay trades latency for bigger batches.
      if (!this.timer && !this.draining) {
        this.timer =
          this.delayMs > 0 ? setTimeout(() => void this.drain(), this.delayMs) : setImmediate(() => void this.drain());
      }
    });
  };

  private async drain(): Promise<void> {
    this.timer = undefined;
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        if (batch.length === 1 || !(await this.together(batch))) {
          for (const p of batch) await this.alone(p);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private async together(batch: Pending[]): Promise<boolean> {
    let results: unknown[];
    try {
      results = await this.database.db.transaction().execute(async (trx) => {
        const out: unknown[] = [];
        for (const p of batch) out.push(await p.work(trx));
        return out;
      });
    } catch {
      return false;
    }
    for (const [i, p] of batch.entries()) p.resolve(results[i]);
    return true;
  }

  private async alone(p: Pending): Promise<void> {
    try {
      p.resolve(await this.database.db.transaction().execute(p.work));
    } catch (err) {
      p.reject(err);
    }
  }
}
