// Body of the SQLite checkpoint thread (see sqlite-checkpointer.ts). Plain JavaScript so the
// thread starts in milliseconds without the TypeScript loader: it only needs better-sqlite3.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { file, intervalMs, restartFrames } = workerData;
const db = new Database(file);
// Never wait for a lock: a RESTART checkpoint that waited for the writer (or for readers) while
// holding the write lock would stall the main thread's next write for as long. Without a busy
// handler, a checkpoint that cannot get a lock does what PASSIVE would and reports busy.
db.pragma('busy_timeout = 0');

// PASSIVE copies committed WAL frames into the database file without blocking the writer on
// the main thread. But the writer starts the WAL over only when a checkpoint has covered all of
// it at the moment a write transaction begins, which under a steady stream of commits never
// happens: the WAL then grows without bound (1 GB in 15 s; test/db/sqlite-checkpointer.test.ts).
// So once it holds `restartFrames` frames and a PASSIVE pass (which did the copying and the
// syncing) has caught up, a RESTART follows: it takes the write lock only between two of the
// writer's transactions, copies the few frames committed since (usually none, so no sync under
// the lock), and makes the next writer start the WAL from its beginning. If the writer or a
// reader is busy, it is tried again on the next tick.
function checkpoint() {
  try {
    let [r] = db.pragma('wal_checkpoint(PASSIVE)');
    let restarted = false;
    // Only right after a pass that caught up with the writer: the RESTART then has (almost)
    // nothing left to copy and sync while it holds the write lock.
    if (r.log >= restartFrames && r.checkpointed === r.log) {
      [r] = db.pragma('wal_checkpoint(RESTART)');
      restarted = r.busy === 0;
    }
    parentPort?.postMessage({ walFrames: r.log, checkpointed: r.checkpointed, restarted });
  } catch (err) {
    parentPort?.postMessage({ error: err instanceof Error ? err.message : String(err) });
  }
}

const timer = setInterval(checkpoint, intervalMs);
parentPort?.on('message', (m) => {
  if (m === 'stop') {
    clearInterval(timer);
    checkpoint();
    db.close();
    parentPort?.close();
  }
});
