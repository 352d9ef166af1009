// Body of the SQLite checkpoint thread (see sqlite-checkpointer.ts). Plain JavaScript so the
// thread starts in milliseconds without the TypeScript loader: it only needs better-sqlite3.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { file, intervalMs } = workerData;
const db = new Database(file);
db.pragma('busy_timeout = 5000');

// PASSIVE copies committed WAL frames into the database file without blocking the writer on
// the main thread; once a checkpoint has covered the whole WAL, the writer starts the WAL over.
function checkpoint() {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort?.postMessage({ walFrames: r.log, checkpointed: r.checkpointed });
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
