/**
 * Moves SQLite's WAL checkpoints off the event loop.
 *
 * By default SQLite checkpoints inside the COMMIT that pushes the WAL past 1,000 pages: that
 * commit then copies megabytes into the database file, synchronously, on the thread that also
 * serves every HTTP and SMTP connection. Under a steady write load this showed as latency spikes
 * (SMTP submission p99 141 ms with in-commit checkpoints vs 17 ms without, same run, see
 * docs/benchmarks.md). Here the main connection never checkpoints; a worker thread with its own
 * connection runs a PASSIVE checkpoint every `intervalMs`, which does not block the writer.
 * Under steady writes a PASSIVE checkpoint never lets the WAL start over, so once the WAL holds
 * `restartFrames` frames the thread also runs a RESTART checkpoint that never waits for a lock
 * (see sqlite-checkpoint-thread.js): the WAL stays near that size instead of growing without bound.
 * If the writer is so busy that the thread never finds it between two transactions and the WAL
 * passes twice that size, the main connection runs the RESTART itself the next time it is
 * outside a transaction (the thread has already copied nearly everything, so that costs a short
 * copy and a sync rather than a stall).
 *
 * Durability is unchanged: committed data is in the WAL either way, and the last connection to
 * close checkpoints what is left. If the thread cannot run, the main connection goes back to
 * checkpointing itself.
 */
import { statSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import type SqliteDatabase from 'better-sqlite3';

const THREAD = new URL('./sqlite-checkpoint-thread.js', import.meta.url);

export interface Checkpointer {
  stop(): Promise<void>;
  /**
   * WAL restarts so far: by the thread, and by the main connection's fallback (each of those
   * copied and synced on the event loop; tests, diagnostics).
   */
  stats(): { threadRestarts: number; mainThreadRestarts: number };
}

export interface CheckpointerOptions {
  intervalMs?: number;
  /** WAL frames (pages) after which the thread starts the WAL over; default 4,096 (16 MB of 4 KB pages). */
  restartFrames?: number;
}

export function startCheckpointer(
  raw: SqliteDatabase.Database,
  file: string,
  { intervalMs = 200, restartFrames = 4096 }: CheckpointerOptions = {},
): Checkpointer {
  // After a full checkpoint the WAL restarts from the beginning; this keeps the file itself
  // from staying at its largest size.
  const journalLimit = 64 * 2 ** 20;
  raw.pragma(`journal_size_limit = ${journalLimit}`);
  raw.pragma('wal_autocheckpoint = 0');
  const fallBack = () => {
    if (raw.open) raw.pragma('wal_autocheckpoint = 1000');
  };
  let worker: Worker;
  try {
    // execArgv: []: the thread is plain JavaScript and needs none of the parent's loaders (tsx).
    worker = new Worker(THREAD, { workerData: { file, intervalMs, restartFrames }, execArgv: [] });
  } catch {
    fallBack();
    return { stop: async () => {}, stats: () => ({ threadRestarts: 0, mainThreadRestarts: 0 }) };
  }
  worker.unref();
  worker.on('error', fallBack);
  let stopped = false;
  worker.on('exit', () => {
    if (!stopped) fallBack();
  });
  let restartQueued = false;
  let threadRestarts = 0;
  let mainThreadRestarts = 0;
  const restartHere = (tries: number) => {
    restartQueued = false;
    if (stopped || !raw.open || tries <= 0) return;
    let done = false;
    // Inside an open transaction (Kysely awaiting between statements) a checkpoint cannot run;
    // while a streamed query is being read, better-sqlite3 refuses any other call (caught).
    if (!raw.inTransaction) {
      try {
        const timeout = raw.pragma('busy_timeout', { simple: true }) as number;
        // Never wait here either: a reader holding an old snapshot must not stall the event loop.
        raw.pragma('busy_timeout = 0');
        try {
          const [r] = raw.pragma('wal_checkpoint(RESTART)') as { busy: number }[];
          done = r?.busy === 0;
          if (done) mainThreadRestarts++;
        } finally {
          raw.pragma(`busy_timeout = ${timeout}`);
        }
      } catch {}
    }
    if (!done) {
      // The writer was mid-transaction, or the thread was checkpointing: a little later.
      restartQueued = true;
      setTimeout(() => restartHere(tries - 1), 5).unref();
    }
  };
  const queueRestart = () => {
    if (restartQueued) return;
    restartQueued = true;
    setImmediate(() => restartHere(20));
  };
  worker.on('message', (m: { walFrames?: number; restarted?: boolean }) => {
    if (m.restarted) threadRestarts++;
    else if ((m.walFrames ?? 0) >= 2 * restartFrames) queueRestart();
  });
  // A thread that a loaded machine schedules late (or one stuck copying a large WAL) reports
  // late: the main thread also looks at the file. Past the journal size limit it can only be a
  // WAL that has not restarted since (a restart truncates the file back to that limit).
  const watch = setInterval(() => {
    try {
      if (statSync(`${file}-wal`).size > journalLimit) queueRestart();
    } catch {}
  }, 250);
  watch.unref();
  return {
    stats: () => ({ threadRestarts, mainThreadRestarts }),
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(watch);
      // Keep the process alive until the thread is gone: awaiting an unref'd thread alone would
      // let the event loop empty (a CLI command would then exit with code 13).
      worker.ref();
      const exited = new Promise((r) => worker.once('exit', r));
      worker.postMessage('stop');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000).unref())]);
      await worker.terminate();
    },
  };
}
