/**
 * Moves SQLite's WAL checkpoints off the event loop.
 *
 * By default SQLite checkpoints inside the COMMIT that pushes the WAL past 1,000 pages: that
 * commit then copies megabytes into the database file, synchronously, on the thread that also
 * serves every HTTP and SMTP connection. Under a steady write load this showed as latency spikes
 * (SMTP submission p99 141 ms with in-commit checkpoints vs 17 ms without, same run, see
 * docs/benchmarks.md). Here the main connection never checkpoints; a worker thread with its own
 * connection runs a PASSIVE checkpoint every `intervalMs`, which does not block the writer.
 *
 * Durability is unchanged: committed data is in the WAL either way, and the last connection to
 * close checkpoints what is left. If the thread cannot run, the main connection goes back to
 * checkpointing itself.
 */
import { Worker } from 'node:worker_threads';
import type SqliteDatabase from 'better-sqlite3';

const THREAD = new URL('./sqlite-checkpoint-thread.js', import.meta.url);

export interface Checkpointer {
  stop(): Promise<void>;
}

export function startCheckpointer(raw: SqliteDatabase.Database, file: string, intervalMs = 200): Checkpointer {
  // After a full checkpoint the WAL restarts from the beginning; this keeps the file itself
  // from staying at its largest size.
  raw.pragma('journal_size_limit = 67108864');
  raw.pragma('wal_autocheckpoint = 0');
  const fallBack = () => {
    if (raw.open) raw.pragma('wal_autocheckpoint = 1000');
  };
  let worker: Worker;
  try {
    // execArgv: []: the thread is plain JavaScript and needs none of the parent's loaders (tsx).
    worker = new Worker(THREAD, { workerData: { file, intervalMs }, execArgv: [] });
  } catch {
    fallBack();
    return { stop: async () => {} };
  }
  worker.unref();
  worker.on('error', fallBack);
  let stopped = false;
  worker.on('exit', () => {
    if (!stopped) fallBack();
  });
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
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
