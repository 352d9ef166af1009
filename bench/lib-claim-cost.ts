/**
 * What a claim costs, for bench/fair-claim.ts and bench/fair-claim-leases.ts: SQLite WAL frames
 * in use, the main thread's own CPU time, and a percentile.
 */
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

/** WAL frames in use (mxFrame of the WAL index header, -shm offset 16), or NaN when unreadable. */
export function walFrames(shm: string): number {
  try {
    const fd = openSync(shm, 'r');
    try {
      const b = Buffer.alloc(4);
      readSync(fd, b, 0, 4, 16);
      return b.readUInt32LE(0);
    } finally {
      closeSync(fd);
    }
  } catch {
    return Number.NaN;
  }
}

/**
 * Nanoseconds the main thread has run (Linux /proc schedstat), or NaN. process.cpuUsage() counts
 * every thread: the SQLite checkpoint thread and V8's helpers too, which run beside the claim.
 */
const SCHEDSTAT = `/proc/${process.pid}/task/${process.pid}/schedstat`;
export function mainThreadNs(): number {
  try {
    return Number(readFileSync(SCHEDSTAT, 'utf8').split(' ')[0]);
  } catch {
    return Number.NaN;
  }
}

/** The p-th percentile of xs (nearest rank), NaN when empty. */
export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}
