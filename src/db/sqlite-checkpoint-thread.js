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
// reader is busy, it is tried again after RETRY_MS, not a whole interval later.
//
// Why (docs/benchmarks.md "Session 13"): under back-to-back fair claims the thread's RESTART, tried
// once per interval (200 ms), mostly found the writer busy; the WAL reached the fallback's
// threshold (twice restartFrames) and the main connection restarted it itself, copying and
// syncing the database file on the event loop (37-76 ms each, several times a run), or a RESTART
// after a long pass copied thousands of frames while holding the write lock, the main thread
// sleeping in its busy handler meanwhile. A busy writer leaves short gaps between transactions:
// trying again soon finds one. And a pass copies only the frames that were in the WAL when it
// began, while a fast writer adds more as it copies and syncs; so past restartFrames, passes
// follow one another at once, each copying what arrived during the one before, until one copied
// at most CAUGHT_UP_FRAMES (it was short, so little arrived during it), for at most
// CATCH_UP_PASSES: the RESTART after it has little to copy under the lock.
const CATCH_UP_PASSES = 6;
const CAUGHT_UP_FRAMES = 256;
const RETRY_MS = 5;

/**
 * One round; true when a RESTART was due and found the writer busy (try again soon). A pass that
 * did not catch up was held back by a reader's old snapshot: that waits for the next interval.
 */
function checkpoint() {
  try {
    let [r] = db.pragma('wal_checkpoint(PASSIVE)');
    for (let pass = 1; pass < CATCH_UP_PASSES && r.log >= restartFrames && r.checkpointed === r.log; pass++) {
      const before = r.log;
      [r] = db.pragma('wal_checkpoint(PASSIVE)');
      // r.log is where the WAL ended when this pass began: before + what arrived during the last
      // pass. (Smaller: the WAL started over meanwhile, by the main connection's fallback.)
      if (r.log - before <= CAUGHT_UP_FRAMES || r.log < before) break;
    }
    let restarted = false;
    let due = false;
    // Only right after a pass that caught up with the writer: the RESTART then has (almost)
    // nothing left to copy and sync while it holds the write lock.
    if (r.log >= restartFrames && r.checkpointed === r.log) {
      due = true;
      [r] = db.pragma('wal_checkpoint(RESTART)');
      restarted = r.busy === 0;
    }
    parentPort?.postMessage({ walFrames: r.log, checkpointed: r.checkpointed, restarted });
    return due && !restarted;
  } catch (err) {
    parentPort?.postMessage({ error: err instanceof Error ? err.message : String(err) });
    return false;
  }
}

let stopped = false;
let timer = null;
function round() {
  if (stopped) return;
  timer = setTimeout(round, checkpoint() ? RETRY_MS : intervalMs);
}
timer = setTimeout(round, intervalMs);
parentPort?.on('message', (m) => {
  if (m === 'stop') {
    stopped = true;
    clearTimeout(timer);
    checkpoint();
    db.close();
    parentPort?.close();
  }
});
