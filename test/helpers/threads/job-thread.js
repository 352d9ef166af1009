// A worker thread for the tests of lib/timed-worker-pool.ts: answers each job by its kind.
// 'echo' answers at once, 'spin' never returns (a job past its time limit), 'hog' allocates until
// the thread's heap limit ends it, 'throw' answers with an error.
import { parentPort } from 'node:worker_threads';

const port = parentPort;
port.on('message', ({ id, job }) => {
  if (job.kind === 'spin') for (;;);
  if (job.kind === 'hog') {
    const kept = [];
    for (;;) kept.push(new Array(100_000).fill(kept.length));
  }
  if (job.kind === 'throw') return port.postMessage({ id, error: 'refused' });
  port.postMessage({ id, result: job.value });
});
port.postMessage({ ready: true });
