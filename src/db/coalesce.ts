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
 * unit that waited for it (the batch then re-runs them, see GroupCommit).
 */
export function coalesced<I, R>(trx: Executor, name: string, item: I, run: (items: I[]) => Promise<R[]>): Promise<R> {
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
