import type { ControlledTransaction, Transaction } from 'kysely';
import { Pacer } from '../lib/pacer.ts';
import { insertMany } from './batch.ts';
import { bufferInserts, InsertBuffer } from './deferred-inserts.ts';
import { isPostgres } from './dialect.ts';
import type { Database } from './index.ts';
import type { DB } from './schema.ts';

type Work<T> = (trx: Transaction<DB>) => Promise<T>;

interface Pending {
  work: Work<unknown>;
  /** Its insertMany calls are held back and written with the batch's multi-row INSERTs. */
  buffered: boolean;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface GroupCommitOptions {
  /** Most units of work per shared transaction; default 128. */
  maxBatch?: number;
  /** How long the first unit waits for company, in ms; 0 (default) = until the current I/O phase ends. */
  delayMs?: number;
  /** PostgreSQL: most batches in flight at once, each on its own connection; default 4. SQLite: always 1. */
  lanes?: number;
}

/** Unit `index` of a batch threw `cause`; the batch was rolled back. */
class MemberFailed extends Error {
  constructor(
    readonly index: number,
    readonly cause: unknown,
  ) {
    super('a unit of the batch failed');
  }
}

/** COMMIT itself failed: whether it took effect is unknown, so nothing may run again. */
class CommitFailed extends Error {
  constructor(readonly cause: unknown) {
    super('commit failed');
  }
}

/**
 * Group commit, on both databases. Concurrent units of work (accepts over HTTP and SMTP,
 * inbound reports, tracking hits) that arrive within one event-loop turn run in one
 * transaction, one after the other, and commit together: N commits (N WAL flushes) become one.
 * Units run through `runBuffered` also hand their inserts to the batch, which writes them with
 * one multi-row INSERT per table just before COMMIT (src/db/deferred-inserts.ts). Each caller is
 * answered only after the commit that holds its work, so "accepted means durably stored" holds.
 *
 * SQLite has one writer: one batch at a time. PostgreSQL runs up to `lanes` batches at once on
 * separate pool connections, so a slow batch does not hold up the next and the batches grow
 * with the load (a lane takes whatever queued while the others were busy).
 *
 * A failure never fails a neighbour: if unit i throws, the batch is rolled back and run again
 * without it, and unit i then runs alone in a transaction of its own (so its answer is its own,
 * not a neighbour's doing). If the multi-row flush fails, no unit can be blamed: each runs
 * alone. Units must therefore be pure database work (safe to run again after a rollback). If
 * COMMIT fails, whether it took effect is unknown (the connection may have died after the server
 * committed): nothing is retried and every unit of the batch gets the error, as a single
 * transaction's caller would.
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private active = 0;
  private readonly lanes: number;
  private readonly maxBatch: number;
  private readonly delayMs: number;

  constructor(
    private readonly database: Database,
    opts: GroupCommitOptions = {},
  ) {
    this.lanes = isPostgres(database) ? Math.max(1, opts.lanes ?? 4) : 1;
    this.maxBatch = opts.maxBatch ?? 128;
    this.delayMs = opts.delayMs ?? 0;
  }

  /** Runs `work` in a transaction (possibly shared); resolves after that transaction commits. */
  run = <T>(work: Work<T>): Promise<T> => this.enqueue(work, false);

  /**
   * As `run`, and insertMany on the transaction is held back for the batch's multi-row INSERTs:
   * only for work that never reads rows it inserted (they are not there until the batch ends).
   */
  runBuffered = <T>(work: Work<T>): Promise<T> => this.enqueue(work, true);

  private enqueue<T>(work: Work<T>, buffered: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, buffered, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.active >= this.lanes || this.queue.length === 0) return;
    this.scheduled = true;
    // setImmediate gathers every request parsed in this event-loop turn without idling the
    // process on a timer; a positive delay trades latency for bigger batches.
    const start = () => {
      this.scheduled = false;
      void this.lane();
    };
    if (this.delayMs > 0) setTimeout(start, this.delayMs);
    else setImmediate(start);
  }

  private async lane(): Promise<void> {
    if (this.active >= this.lanes || this.queue.length === 0) return;
    this.active++;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        // Another lane may take what arrives while this batch runs.
        this.schedule();
        await this.settle(batch, 0);
      }
    } finally {
      this.active--;
      this.schedule();
    }
  }

  private async settle(batch: Pending[], depth: number): Promise<void> {
    let results: unknown[];
    try {
      results = await this.together(batch);
    } catch (err) {
      if (batch.length === 1) {
        batch[0]?.reject(err instanceof MemberFailed || err instanceof CommitFailed ? err.cause : err);
        return;
      }
      if (err instanceof CommitFailed) {
        for (const p of batch) p.reject(err.cause);
        return;
      }
      if (err instanceof MemberFailed && depth < 3) {
        const failed = batch[err.index] as Pending;
        await this.settle(
          batch.filter((_, i) => i !== err.index),
          depth + 1,
        );
        await this.settle([failed], 0);
        return;
      }
      for (const p of batch) await this.settle([p], 0);
      return;
    }
    for (const [i, p] of batch.entries()) p.resolve(results[i]);
  }

  private async together(batch: Pending[]): Promise<unknown[]> {
    const trx: ControlledTransaction<DB> = await this.database.db.startTransaction().execute();
    const buffer = batch.some((p) => p.buffered) ? new InsertBuffer() : undefined;
    const out: unknown[] = [];
    try {
      for (const [i, p] of batch.entries()) {
        bufferInserts(trx, p.buffered ? buffer : undefined);
        try {
          out.push(await p.work(trx));
        } catch (err) {
          throw new MemberFailed(i, err);
        }
      }
      bufferInserts(trx, undefined);
      if (buffer) {
        const pace = new Pacer();
        for (const g of buffer.drain()) await insertMany(trx, g.table as keyof DB & string, g.rows as never[], pace);
      }
    } catch (err) {
      bufferInserts(trx, undefined);
      await trx
        .rollback()
        .execute()
        .catch(() => {});
      throw err;
    }
    try {
      await trx.commit().execute();
    } catch (err) {
      // Kysely keeps the connection after a failed COMMIT; rollback releases it.
      await trx
        .rollback()
        .execute()
        .catch(() => {});
      throw new CommitFailed(err);
    }
    return out;
  }
}
