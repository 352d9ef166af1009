import type { Executor } from './executor.ts';

/**
 * Reads of the units of one group-commit batch, merged into one statement.
 *
 * On PostgreSQL the units of a batch made only of buffered accepts run at the same time on the
 * batch's connection (src/db/group-commit.ts); every statement is a round trip the whole batch
 * waits for, and the connection answers one statement after another. A read that every accept
 * makes (the suppression lookup) is therefore gathered: the units that ask for it in the same
 * event-loop turn get their answers from one statement. Outside such a batch (SQLite, a lone
 * transaction, the API's other paths) `coalesced` simply runs the read for its one item.
 */
interface Gather {
  items: unknown[];
  waiters: { resolve(v: unknown): void; reject(e: unknown): void }[];
}

const open = new WeakMap<object, Map<string, Gather>>();

/** Turns gathering on for `trx` (while a batch's units run concurrently on it) or off. */
export function gatherReads(trx: Executor, on: boolean): void {
  if (on) open.set(trx, new Map());
  else open.delete(trx);
}

/**
 * Runs `run` for `item`, together with the items other units of the batch pass under the same
 * `name` in this event-loop turn when gathering is on for `trx`. `run` gets the items in arrival
 * order and must return one result per item, in that order. A failure of `run` fails every
 * unit that waited for it (the batch then re-runs them, see GroupCommit). With a `guard`, the
 * read may instead be answered without a statement (see Guard).
 */
export function coalesced<I, R>(
  trx: Executor,
  name: string,
  item: I,
  run: (items: I[]) => Promise<R[]>,
  guard?: Guard<I, R>,
): Promise<R> {
  if (guard) {
    const answer = known(trx, name, item, guard);
    if (answer !== undefined) return Promise.resolve(answer);
  }
  const names = open.get(trx);
  if (!names) return run([item]).then((r) => r[0] as R);
  let g = names.get(name);
  if (!g) {
    const fresh: Gather = { items: [], waiters: [] };
    g = fresh;
    names.set(name, fresh);
    // setImmediate: every unit still running on microtasks (they do no I/O until this read)
    // reaches its call before the statement goes out.
    setImmediate(() => {
      if (names.get(name) === fresh) names.delete(name);
      run(fresh.items as I[]).then(
        (results) => {
          for (const [i, w] of fresh.waiters.entries()) w.resolve(results[i]);
        },
        (err: unknown) => {
          for (const w of fresh.waiters) w.reject(err);
        },
      );
    });
  }
  const gather = g;
  return new Promise<R>((resolve, reject) => {
    gather.items.push(item);
    gather.waiters.push({ resolve: resolve as (v: unknown) => void, reject });
  });
}

/**
 * A read whose usual answer is known in advance, so a PostgreSQL batch need not wait for it.
 *
 * The suppression lookup of an accept almost always finds nothing, and on PostgreSQL it costs
 * the batch a round trip before its INSERT statement (SMTP ingest is latency-bound,
 * 10 connections each waiting for its 250). A batch of runInserts units therefore runs them
 * speculatively: each guarded read answers `assume(item)` at once, and the check of all those
 * assumptions goes into the statement that writes the batch's rows (src/db/batch.ts): it
 * inserts only if the check finds no row, in the same snapshot, and returns the rows it found.
 * If it found any, nothing was written and the units run again with the true answers taken
 * from those rows (`answer`), so a batch holding a suppressed recipient costs what it did before
 * (one read, then the INSERT), and every unit sees exactly what a real read would have shown.
 */
export interface Guard<I, R> {
  /** The answer assumed while speculating; undefined to ask the database as usual (not worth guessing). */
  assume(item: I): R | undefined;
  /**
   * PostgreSQL: a SELECT whose rows, if any, could make some assumed answer wrong; its
   * parameters are `$first`, `$first + 1`, ... (as many as `params` returns).
   */
  sql(first: number): string;
  params(items: readonly I[]): unknown[];
  /** The true answer for `item` given the rows `sql` returned for `checked`; undefined if `item` was not among them. */
  answer(item: I, checked: readonly I[], rows: readonly unknown[]): R | undefined;
}

/** The assumptions of one guarded read in a speculative run, and (after the check) its rows. */
export interface Assumed {
  guard: Guard<unknown, unknown>;
  items: unknown[];
  rows?: unknown[];
}

const speculating = new WeakMap<object, Map<string, Assumed>>();
const primed = new WeakMap<object, Map<string, Assumed>>();

/** Turns speculation on for `trx` (guarded reads answer their assumption and are recorded) or off. */
export function speculate(trx: Executor, on: boolean): void {
  if (on) speculating.set(trx, new Map());
  else speculating.delete(trx);
}

/** The assumptions recorded on `trx` since `speculate(trx, true)`, by read name. */
export function assumptions(trx: Executor): Map<string, Assumed> {
  return speculating.get(trx) ?? new Map();
}

/** Guarded reads on `trx` answer from these checked rows (the run after a failed speculation); undefined turns it off. */
export function primeReads(trx: Executor, known: Map<string, Assumed> | undefined): void {
  if (known) primed.set(trx, known);
  else primed.delete(trx);
}

/** A guarded read's answer without asking the database, if speculation or checked rows give one. */
function known<I, R>(trx: Executor, name: string, item: I, guard: Guard<I, R>): R | undefined {
  const spec = speculating.get(trx);
  if (spec) {
    const assumed = guard.assume(item);
    if (assumed === undefined) return undefined;
    let a = spec.get(name);
    if (!a) {
      a = { guard: guard as Guard<unknown, unknown>, items: [] };
      spec.set(name, a);
    }
    a.items.push(item);
    return assumed;
  }
  const p = primed.get(trx)?.get(name);
  return p?.rows ? guard.answer(item, p.items as I[], p.rows) : undefined;
}
