import { performance } from 'node:perf_hooks';

/** Lets the event loop run its timers and I/O before the caller goes on. */
export function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Cuts long synchronous work into slices of about `sliceMs`, so one big request (a 10,000-recipient
 * transmission) cannot hold the event loop for long. Awaiting an already-resolved promise never
 * gives the loop a turn (better-sqlite3 answers synchronously, so a whole transaction of awaits is
 * one stretch): only a macrotask (setImmediate) lets timers, sockets and other requests run.
 *
 *   const pace = new Pacer();
 *   for (const item of items) { work(item); await pace.tick(); }
 *
 * `tick()` returns undefined (no promise, no microtask) while the slice lasts, so calling it once
 * per item costs one clock read.
 */
export class Pacer {
  private since = performance.now();

  constructor(private readonly sliceMs = 10) {}

  tick(): Promise<void> | undefined {
    if (performance.now() - this.since < this.sliceMs) return undefined;
    return this.yield();
  }

  /** Yields now, whatever the slice. */
  async yield(): Promise<void> {
    await yieldToLoop();
    this.since = performance.now();
  }
}
