import { afterEach, describe, expect, it } from 'vitest';
import { JobAbandoned, TimedWorkerPool } from './timed-worker-pool.ts';

const ENTRY = new URL('../../test/helpers/threads/job-thread.js', import.meta.url);
let pool: TimedWorkerPool | null = null;
afterEach(async () => {
  await pool?.close();
  pool = null;
});

describe('TimedWorkerPool', () => {
  it('answers jobs, and errors as rejections', async () => {
    pool = new TimedWorkerPool({ entry: ENTRY, size: 2, limitMs: 5_000, maxHeapMb: 64 });
    expect(await pool.run({ kind: 'echo', value: 42 })).toBe(42);
    await expect(pool.run({ kind: 'throw' })).rejects.toThrow('refused');
  });

  it('terminates a job past its limit, and the next job runs on a new thread', async () => {
    pool = new TimedWorkerPool({ entry: ENTRY, size: 1, limitMs: 300, maxHeapMb: 64 });
    await pool.run({ kind: 'echo', value: 'warm' });
    const started = performance.now();
    const spin = pool.run({ kind: 'spin' });
    const after = pool.run({ kind: 'echo', value: 'after' }, 30_000);
    await expect(spin).rejects.toBeInstanceOf(JobAbandoned);
    await expect(spin).rejects.toThrow('took longer than 300 ms');
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await after).toBe('after');
    expect(pool.abandoned).toBe(1);
  });

  it("a job that exhausts its thread's heap fails alone; the process and the next job are fine", async () => {
    pool = new TimedWorkerPool({ entry: ENTRY, size: 1, limitMs: 60_000, maxHeapMb: 32 });
    const hog = pool.run({ kind: 'hog' });
    await expect(hog).rejects.toThrow('ran out of memory or stopped while doing it');
    expect(await pool.run({ kind: 'echo', value: 'still here' })).toBe('still here');
  });
});
