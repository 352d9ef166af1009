/**
 * Worker threads for work on untrusted input that must neither hold the event loop nor run
 * without end: each thread does one job at a time, a job that runs past its time limit has its
 * thread terminated (and replaced on the next job), and a thread that runs out of its memory
 * limit fails only the job it was doing. Used for template checks and previews
 * (modules/content/template-sandbox.ts); the delivery render threads have their own pool with the
 * same watchdog (delivery/render/render-pool.ts).
 */
import { Worker } from 'node:worker_threads';

/** A job that ran past its limit, or whose thread stopped (out of memory, crash) while doing it. */
export class JobAbandoned extends Error {
  constructor(
    readonly reason: 'timeout' | 'stopped',
    message: string,
  ) {
    super(message);
    this.name = 'JobAbandoned';
  }
}

export interface TimedWorkerPoolOptions {
  /**
   * Module the threads run: it posts THREAD_READY once loaded, then answers `{id, result}` or
   * `{id, error}` for each `{id, job}`.
   */
  entry: URL;
  size: number;
  /** Default time limit of a job, from the moment its thread starts it. */
  limitMs: number;
  /** V8 heap limit of each thread: past it the thread dies, not the process. */
  maxHeapMb: number;
}

interface Job {
  id: number;
  job: unknown;
  limitMs: number;
  resolve(r: unknown): void;
  reject(err: Error): void;
}

interface Slot {
  worker: Worker;
  /** The thread has loaded its modules (it says so): jobs are sent, and timed, only from then on. */
  ready: boolean;
  current: Job | null;
  timer: NodeJS.Timeout | null;
}

export type ThreadReply = { id: number; result: unknown } | { id: number; error: string };

/** What a thread posts once it has loaded and can take jobs. */
export const THREAD_READY = { ready: true } as const;

export class TimedWorkerPool {
  private readonly slots: (Slot | null)[];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  /** Jobs abandoned since start (time limit or thread stopped), for metrics and tests. */
  abandoned = 0;

  constructor(private readonly options: TimedWorkerPoolOptions) {
    this.slots = Array.from({ length: Math.max(1, options.size) }, () => null);
  }

  run<T>(job: unknown, limitMs = this.options.limitMs): Promise<T> {
    if (this.closed) return Promise.reject(new Error('worker pool is closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, job, limitMs, resolve: resolve as (r: unknown) => void, reject });
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const j of this.queue.splice(0)) j.reject(new Error('worker pool is closed'));
    const running = this.slots.filter((s): s is Slot => s !== null);
    this.slots.fill(null);
    for (const s of running) {
      if (s.timer) clearTimeout(s.timer);
      s.current?.reject(new Error('worker pool is closed'));
    }
    await Promise.all(running.map((s) => s.worker.terminate()));
  }

  private pump(): void {
    for (let i = 0; i < this.slots.length && this.queue.length > 0; i++) {
      const slot = this.slots[i] ?? this.start(i);
      if (slot.current || !slot.ready) continue;
      const job = this.queue.shift() as Job;
      slot.current = job;
      // The limit counts from now: a thread does one job at a time, so the job starts when sent.
      // A thread's start-up (loading modules, seconds on a loaded machine) is not counted.
      slot.timer = setTimeout(() => this.abandon(i, slot, 'timeout'), job.limitMs);
      slot.worker.postMessage({ id: job.id, job: job.job });
    }
  }

  private start(i: number): Slot {
    const worker = new Worker(this.options.entry, {
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: this.options.maxHeapMb, maxYoungGenerationSizeMb: 32 },
    });
    worker.unref();
    const slot: Slot = { worker, ready: false, current: null, timer: null };
    this.slots[i] = slot;
    worker.on('message', (m: ThreadReply | { ready: true }) => {
      if ('ready' in m) {
        slot.ready = true;
        this.pump();
        return;
      }
      const job = slot.current;
      if (!job || job.id !== m.id) return;
      if (slot.timer) clearTimeout(slot.timer);
      slot.current = null;
      slot.timer = null;
      if ('error' in m) job.reject(new Error(m.error));
      else job.resolve(m.result);
      this.pump();
    });
    const stopped = () => this.abandon(i, slot, 'stopped');
    worker.on('error', stopped);
    worker.on('exit', stopped);
    return slot;
  }

  /** Ends a slot's thread and fails the job it was doing; the queue goes on on a new thread. */
  private abandon(i: number, slot: Slot, reason: 'timeout' | 'stopped'): void {
    if (this.slots[i] !== slot) return;
    this.slots[i] = null;
    if (slot.timer) clearTimeout(slot.timer);
    const job = slot.current;
    slot.current = null;
    if (reason === 'timeout') void slot.worker.terminate();
    if (job) {
      this.abandoned++;
      job.reject(
        new JobAbandoned(
          reason,
          reason === 'timeout' ? `took longer than ${job.limitMs} ms` : 'ran out of memory or stopped while doing it',
        ),
      );
    }
    if (!this.closed) this.pump();
  }
}
