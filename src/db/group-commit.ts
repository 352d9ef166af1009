import { performance } from 'node:perf_hooks';
import type { ControlledTransaction, Kysely, Transaction } from 'kysely';
import { Pacer } from '../lib/pacer.ts';
import { checkStatement, insertGroups, oneStatement } from './batch.ts';
import { type Assumed, assumptions, gatherReads, primeReads, speculate } from './coalesce.ts';
import { bufferInserts, InsertBuffer } from './deferred-inserts.ts';
import { isPostgres, runSql } from './dialect.ts';
import type { Database } from './index.ts';
import type { DB } from './schema.ts';

type Work<T> = (trx: Transaction<DB>) => Promise<T>;

interface Pending {
  work: Work<unknown>;
  /** Its insertMany calls are held back and written with the batch's multi-row INSERTs. */
  buffered: boolean;
  /** Besides those inserts it only reads (runInserts): on PostgreSQL its batch needs no transaction. */
  insertsOnly: boolean;
  resolve(value: unknown): void;
  reject(err: unknown): void;
  /** When it was queued (performance.now()): a lane opens for work that waited spillMs. */
  queuedAt: number;
}

export interface GroupCommitOptions {
  /** Most units of work per shared transaction; default 128. */
  maxBatch?: number;
  /** How long the first unit waits for company, in ms; 0 (default) = until the current I/O phase ends. */
  delayMs?: number;
  /** PostgreSQL: most batches in flight at once, each on its own connection; default 4. SQLite: always 1. */
  lanes?: number;
  /**
   * PostgreSQL: how long work may wait while a batch runs before another lane opens for it, in
   * ms; default 5. 0 opens a lane for whatever arrives while the others are busy.
   */
  spillMs?: number;
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
 * separate pool connections, so a slow batch (a 10,000-recipient transmission) does not hold up
 * the next; but a further lane opens only for work that has waited `spillMs` behind the running
 * ones. A batch of accepts takes ~1 ms on PostgreSQL: work that arrives meanwhile waits for it
 * and goes in the next batch whole, one statement and one WAL flush for all of it, where a lane
 * opened at once would split the same work into batches of one or two, each paying its own
 * statement and flush (SMTP ingest at 10 connections: PostgreSQL CPU per message 128-155 us
 * with a lane for every arrival, 90-93 us with one lane; docs/benchmarks.md, session 12).
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
  private readonly spillMs: number;
  /** The timer that opens another lane when the queue's oldest work has waited spillMs. */
  private spill: NodeJS.Timeout | undefined;
  /** PostgreSQL: the units of an all-buffered batch run at the same time (see concurrently). */
  private readonly concurrent: boolean;

  constructor(
    private readonly database: Database,
    opts: GroupCommitOptions = {},
  ) {
    this.lanes = isPostgres(database) ? Math.max(1, opts.lanes ?? 4) : 1;
    // SQLite answers synchronously: a read costs no round trip, so nothing is gained there.
    this.concurrent = isPostgres(database);
    this.maxBatch = opts.maxBatch ?? 128;
    this.delayMs = opts.delayMs ?? 0;
    this.spillMs = Math.max(0, opts.spillMs ?? 5);
  }

  /** Runs `work` in a transaction (possibly shared); resolves after that transaction commits. */
  run = <T>(work: Work<T>): Promise<T> => this.enqueue(work, false);

  /**
   * As `run`, and insertMany on the transaction is held back for the batch's multi-row INSERTs:
   * only for work that never reads rows it inserted (they are not there until the batch ends).
   */
  runBuffered = <T>(work: Work<T>): Promise<T> => this.enqueue(work, true);

  /**
   * As `runBuffered`, for work that writes nothing but those held-back inserts (an accept without
   * an Idempotency-Key): any other statement it makes must be a read. On PostgreSQL a batch of
   * such units opens no transaction: they read in autocommit, and all their rows go in with one
   * statement, atomic by itself (see withoutTransaction). Reads in a READ COMMITTED transaction
   * see no more than this: each statement takes its own snapshot either way.
   */
  runInserts = <T>(work: Work<T>): Promise<T> => this.enqueue(work, true, true);

  private enqueue<T>(work: Work<T>, buffered: boolean, insertsOnly = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        work,
        buffered,
        insertsOnly,
        resolve: resolve as (v: unknown) => void,
        reject,
        queuedAt: performance.now(),
      });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.active >= this.lanes || this.queue.length === 0) return;
    // A lane is running: it takes the queue when its batch ends, unless the queue has waited
    // spillMs by then (see the class comment).
    if (this.active > 0 && this.spillMs > 0) {
      const waited = performance.now() - (this.queue[0] as Pending).queuedAt;
      if (waited < this.spillMs) {
        this.spill ??= setTimeout(() => {
          this.spill = undefined;
          this.schedule();
        }, this.spillMs - waited);
        return;
      }
    }
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
    if (this.concurrent && batch.every((p) => p.insertsOnly)) return this.withoutTransaction(batch);
    const trx: ControlledTransaction<DB> = await this.database.db.startTransaction().execute();
    const buffer = batch.some((p) => p.buffered) ? new InsertBuffer() : undefined;
    let out: unknown[] = [];
    try {
      if (buffer && this.concurrent && batch.length > 1 && batch.every((p) => p.buffered)) {
        out = await this.concurrently(trx, batch, buffer);
      } else {
        for (const [i, p] of batch.entries()) {
          bufferInserts(trx, p.buffered ? buffer : undefined);
          try {
            out.push(await p.work(trx));
          } catch (err) {
            throw new MemberFailed(i, err);
          }
        }
      }
      bufferInserts(trx, undefined);
      if (buffer) await insertGroups(trx, buffer.drain(), new Pacer());
    } catch (err) {
      bufferInserts(trx, undefined);
      gatherReads(trx, false);
      await rollbackQuietly(trx);
      throw err;
    }
    await commitOrFail(trx);
    return out;
  }

  /**
   * PostgreSQL, a batch of runInserts units: BEGIN and COMMIT are two round trips the batch
   * waits for (on a loaded machine each costs milliseconds of scheduling), so none is opened.
   * The units run together on one pooled connection, reading in autocommit; their rows then go
   * in with one statement, which commits (and waits for its WAL flush) by itself, so each caller
   * is still answered only after its rows are durable. A unit that fails wrote nothing (its
   * rows were only held back): the batch runs again without it, as in a transaction. When the
   * rows cannot go in one statement (past the parameter limit), a transaction holds them.
   *
   * The units run speculatively first (src/db/coalesce.ts Guard): guarded reads (the suppression
   * lookup) answer their usual result at once and are checked by the statement that writes the
   * rows, so the common batch is one round trip. If a check finds rows, nothing was written and
   * the units run again, answered from those rows.
   */
  private withoutTransaction(batch: Pending[]): Promise<unknown[]> {
    return this.database.db.connection().execute(async (conn) => {
      try {
        const found = await this.insertsOnce(conn, batch, undefined);
        if (!found.checked) return found.out;
        const again = await this.insertsOnce(conn, batch, found.checked);
        return again.out;
      } catch (err) {
        // The server may have ended the connection (57P01, a restart): pg rejects the running
        // statement before it sees the socket close, and only then marks the client unusable.
        // Released to the pool before that, the client would be handed to the batch's re-run.
        // A statement sent now settles only once pg knows; a live connection just answers it.
        const cause = err instanceof MemberFailed || err instanceof CommitFailed ? err.cause : err;
        if (!refusedByServer(cause)) await runSql(conn, 'select 1', []).catch(() => {});
        throw err;
      }
    });
  }

  /**
   * One run of a runInserts batch on `conn`: speculating when `known` is undefined, else with the
   * guarded reads answered from `known`. Returns the units' results once their rows are stored,
   * or, when a speculation's check found rows (nothing stored), those rows in `checked`.
   */
  private async insertsOnce(
    conn: Kysely<DB>,
    batch: Pending[],
    known: Map<string, Assumed> | undefined,
  ): Promise<{ out: unknown[]; checked?: Map<string, Assumed> }> {
    const trx = conn as unknown as Transaction<DB>;
    const buffer = new InsertBuffer();
    let out: unknown[];
    let assumed: [string, Assumed][] = [];
    speculate(trx, known === undefined);
    primeReads(trx, known);
    try {
      out = await this.concurrently(trx, batch, buffer);
      assumed = [...assumptions(trx).entries()];
    } finally {
      bufferInserts(trx, undefined);
      gatherReads(trx, false);
      speculate(trx, false);
      primeReads(trx, undefined);
    }
    const checks = assumed.map(([, a]) => ({
      sql: (first: number) => a.guard.sql(first),
      params: a.guard.params(a.items),
    }));
    const groups = buffer.drain().filter((g) => g.rows.length > 0);
    const one = await oneStatement(conn, groups, new Pacer(), checks);
    if (!one && checks.length > 0) {
      // No rows, or rows that cannot go in one statement: the checks alone, then as before.
      const alone = checkStatement(checks);
      const rows = await runSql<CheckRow>(conn, alone.sql, alone.params);
      if (rows.length > 0) return { out, checked: byGuard(assumed, rows) };
    }
    if (groups.length === 0) return { out };
    if (one) {
      let rows: CheckRow[];
      try {
        rows = await runSql<CheckRow>(conn, one.sql, one.params);
      } catch (err) {
        // Refused by the server (a constraint, a bad value): nothing was written, and the units
        // are run again alone to find whose rows it was. Anything else (the connection lost
        // mid-statement) may have committed: as a failed COMMIT, nothing may run again.
        if (refusedByServer(err)) throw err;
        throw new CommitFailed(err);
      }
      // A check found rows: the INSERTs took none (same statement, same snapshot).
      if (checks.length > 0 && rows.length > 0) return { out, checked: byGuard(assumed, rows) };
      return { out };
    }
    const tx = await conn.startTransaction().execute();
    try {
      await insertGroups(tx, groups, new Pacer());
    } catch (err) {
      await rollbackQuietly(tx);
      throw err;
    }
    await commitOrFail(tx);
    return { out };
  }

  /**
   * PostgreSQL, a batch of buffered units only (accepts): the units run at the same time on the
   * batch's connection, so the reads they all make are asked once for the batch (src/db/coalesce.ts)
   * instead of one round trip per unit, one after another. Their inserts are buffered, so the
   * order they run in does not matter. The unit blamed for a failure is the first to fail in
   * time: on PostgreSQL one failed statement aborts the transaction, and the neighbours' next
   * statements then fail because of it, not of their own doing.
   */
  private async concurrently(trx: Transaction<DB>, batch: Pending[], buffer: InsertBuffer): Promise<unknown[]> {
    bufferInserts(trx, buffer);
    gatherReads(trx, true);
    // Set in the order failures happen (not by index): see above.
    let first: MemberFailed | undefined;
    const out = await Promise.all(
      batch.map(async (p, i) => {
        try {
          return await p.work(trx);
        } catch (err) {
          first ??= new MemberFailed(i, err);
          return undefined;
        }
      }),
    );
    gatherReads(trx, false);
    if (first) throw first;
    return out;
  }
}

/**
 * A PostgreSQL error the server raised for the statement itself (it has a SQLSTATE), other than
 * a lost connection (class 08), operator intervention such as a terminated backend (57) or an
 * internal error (XX): for those the statement's outcome is not known.
 */
function refusedByServer(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false;
  return !['08', '57', 'XX'].includes(code.slice(0, 2));
}

/** A row of a guarded statement: which check found it, and the row. */
interface CheckRow {
  guard: number;
  row: unknown;
}

/** The assumptions with the rows their checks found, by read name. */
function byGuard(assumed: [string, Assumed][], rows: CheckRow[]): Map<string, Assumed> {
  const out = new Map<string, Assumed>();
  for (const [i, [name, a]] of assumed.entries()) {
    out.set(name, { ...a, rows: rows.filter((r) => Number(r.guard) === i).map((r) => r.row) });
  }
  return out;
}

/** Rolls back, ignoring a failure: the connection may be gone already (the error that got us here says so). */
async function rollbackQuietly(tx: ControlledTransaction<DB>): Promise<void> {
  await tx
    .rollback()
    .execute()
    .catch(() => {});
}

/** Commits; a failed COMMIT is rolled back (Kysely keeps the connection after it) and thrown as CommitFailed. */
async function commitOrFail(tx: ControlledTransaction<DB>): Promise<void> {
  try {
    await tx.commit().execute();
  } catch (err) {
    await rollbackQuietly(tx);
    throw new CommitFailed(err);
  }
}
