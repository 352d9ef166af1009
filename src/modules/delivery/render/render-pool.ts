/**
 * Spreads message rendering (MIME + DKIM signature) over worker threads.
 *
 * Why: an RSA-2048 signature costs ~0.3 ms of CPU and MIME building about as much again; on the
 * event loop that also drives every SMTP session and the database writes, that CPU time caps a
 * worker near 1,000 messages/s. Rendering on threads lets the main thread keep sessions busy
 * while other cores sign (measured by `npm run bench:deliver`, docs/benchmarks.md).
 *
 * A thread that dies takes no message with it: what it had in hand goes to a new thread, except
 * the message it was rendering when it stalled past RENDER_STALL_MS (the watchdog terminates it),
 * ran out of its heap (RENDER_HEAP_MB) or threw: that one fails with render_failed, since
 * rendering it again would only do the same to the next thread, or to the event loop if it were
 * done inline.
 * The template language's own budgets (template-budget.ts) stop runaway templates long before;
 * the watchdog is for what they cannot see.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { type RenderedMessage, type RenderRequest, renderMessage } from './renderer.ts';
import type { RenderThreadData, RenderThreadReply, RenderThreadRequest } from './render-thread.ts';
import { RENDER_FAILED } from '../../content/template-language.ts';

export interface Renderer {
  render(req: RenderRequest): Promise<RenderedMessage>;
  close(): Promise<void>;
  /** Starts what rendering needs (threads) and resolves when it can render at full speed. */
  warm?(): Promise<void>;
}

/** Renders on the calling thread (POSTYARD_RENDER_THREADS=0). */
export const inlineRenderer: Renderer = {
  render: (req) => renderMessage(req.msg, req.tx, req.key, req.verpToken, req.bounceHost),
  close: async () => {},
};

interface Pending {
  req: RenderRequest;
  resolve(r: RenderedMessage): void;
  reject(err: Error): void;
}

interface RenderThread {
  worker: Worker;
  ready: boolean;
  /** The request the thread said it started last, and when it last said anything. */
  lastStarted: number | null;
  lastHeardAt: number;
  /** Called once when the thread has loaded (warm()); a thread that dies first calls them too. */
  onReady: (() => void)[];
  backlog: RenderThreadRequest[];
  pending: Map<number, Pending>;
}

// Run from the TypeScript sources (tests, `npm run dev`), a thread must load tsx itself first
// (render-thread-entry.js); the compiled build in dist/ starts the compiled module directly.
const ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('./render-thread-entry.js', import.meta.url)
  : new URL('./render-thread.js', import.meta.url);

/**
 * Requests a thread starts per event-loop turn (render-thread.ts): enough that a turn's fixed
 * cost stays small beside its renders, few enough that composing a new transmission's body is
 * not held back by every request that arrived meanwhile (bench/render-turns.ts).
 */
export const STARTS_PER_TURN = 16;

/**
 * A thread with work in hand that says nothing (no start, no reply) for this long is replaced. A
 * backstop for what the render budgets cannot see: a legitimate render of a large message (10,000
 * tracked links, 25 MB of attachments) takes seconds on a loaded machine and must not be cut.
 */
export const RENDER_STALL_MS = 30_000;
/** Heap limit of a render thread: past it the thread dies, not the process. */
export const RENDER_HEAP_MB = 1_536;

export class RenderPool implements Renderer {
  private readonly threads: (RenderThread | null)[];
  private nextId = 1;
  private closed = false;
  private watchdog: NodeJS.Timeout | null = null;
  /** Threads replaced after a stall or a heap overrun (metrics, tests). */
  replaced = 0;

  constructor(
    size: number,
    private readonly logger: Logger,
    /** 0: every request started as its message arrives (before; the baseline of bench/render-turns.ts). */
    private readonly startsPerTurn: number = STARTS_PER_TURN,
    private readonly stallMs: number = RENDER_STALL_MS,
    /** The threads' module (tests give a stand-in that speaks the same protocol). */
    private readonly entry: URL = ENTRY,
  ) {
    this.threads = Array.from({ length: size }, () => null);
  }

  render(req: RenderRequest): Promise<RenderedMessage> {
    if (this.closed) return inlineRenderer.render(req);
    const slot = this.leastBusySlot();
    const t = this.threads[slot] ?? this.start(slot);
    const id = this.nextId++;
    // The watchdog counts a thread's silence from when it was given work, not from its last reply.
    if (t.pending.size === 0) t.lastHeardAt = performance.now();
    return new Promise((resolve, reject) => {
      t.pending.set(id, { req, resolve, reject });
      const msg: RenderThreadRequest = { id, ...req };
      if (t.ready) t.worker.postMessage(msg);
      else t.backlog.push(msg);
    });
  }

  /**
   * Starts every thread now and resolves once each has loaded its modules. Threads are otherwise
   * started on demand: a start-up burst of mail would wait ~100-300 ms per thread for module
   * loading on the busiest moment of the node's life.
   */
  async warm(): Promise<void> {
    const started = this.threads.map((t, slot) => t ?? this.start(slot));
    await Promise.all(
      started.map((t) => (t.ready ? undefined : new Promise<void>((resolve) => t.onReady.push(resolve)))),
    );
  }

  /** Threads started and loaded, ready to render. */
  readyThreads(): number {
    return this.threads.filter((t) => t?.ready).length;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.watchdog) clearInterval(this.watchdog);
    const running = this.threads.filter((t): t is RenderThread => t !== null);
    this.threads.fill(null);
    // Whatever was still in hand is finished inline, so stopping never loses a render.
    for (const t of running) this.rescue(t);
    // ref(): awaiting an unref'd thread alone would let the event loop empty mid-shutdown.
    await Promise.all(
      running.map((t) => {
        t.worker.ref();
        return t.worker.terminate();
      }),
    );
  }

  private leastBusySlot(): number {
    let best = 0;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (let i = 0; i < this.threads.length; i++) {
      const load = this.threads[i]?.pending.size ?? 0;
      if (load < bestLoad) {
        best = i;
        bestLoad = load;
      }
    }
    return best;
  }

  private start(slot: number): RenderThread {
    // execArgv: []: the entry registers tsx itself; inheriting the parent's --import would load it twice.
    const workerData: RenderThreadData = { startsPerTurn: this.startsPerTurn };
    const worker = new Worker(this.entry, {
      execArgv: [],
      workerData,
      resourceLimits: { maxOldGenerationSizeMb: RENDER_HEAP_MB },
    });
    worker.unref();
    const t: RenderThread = {
      worker,
      ready: false,
      lastStarted: null,
      lastHeardAt: performance.now(),
      onReady: [],
      backlog: [],
      pending: new Map(),
    };
    this.watch();
    const readied = () => {
      for (const resolve of t.onReady.splice(0)) resolve();
    };
    this.threads[slot] = t;
    worker.on('message', (m: RenderThreadReply | { ready: true }) => {
      t.lastHeardAt = performance.now();
      if ('started' in m) {
        t.lastStarted = m.started;
        return;
      }
      if ('ready' in m) {
        t.ready = true;
        for (const msg of t.backlog) worker.postMessage(msg);
        t.backlog = [];
        readied();
        return;
      }
      const p = t.pending.get(m.id);
      if (!p) return;
      t.pending.delete(m.id);
      if (m.ok)
        p.resolve({
          envelopeFrom: m.envelopeFrom,
          raw: Buffer.from(m.raw.buffer, m.raw.byteOffset, m.raw.byteLength),
          signed: m.signed,
          ...(m.renderMs === undefined ? {} : { renderMs: m.renderMs }),
          ...(m.dkimMs === undefined ? {} : { dkimMs: m.dkimMs }),
        });
      else p.reject(new Error(m.error));
    });
    /** `failed`: the thread threw or ran out of its heap (an 'error'), not just ended. */
    const lost = (err: unknown, failed: boolean) => {
      if (this.threads[slot] === t) this.threads[slot] = null;
      // A thread that failed to start must not hold the node's start-up: it renders inline.
      readied();
      if (t.pending.size > 0) this.logger.error({ err, inHand: t.pending.size }, 'render thread stopped');
      // One that never loaded cannot be blamed on a message (and a new one may not load either).
      if (!t.ready) {
        this.rescue(t);
        return;
      }
      const outOfMemory = (err as { code?: string } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.hand(
        t,
        !failed
          ? null
          : outOfMemory
            ? "rendering ran out of the render thread's memory (the thread was replaced)"
            : 'the render thread failed while rendering this message',
      );
    };
    worker.on('error', (err) => lost(err, true));
    worker.on('exit', (code) => lost(new Error(`render thread exited with code ${code}`), false));
    return t;
  }

  private rescue(t: RenderThread): void {
    const pending = [...t.pending.values()];
    t.pending.clear();
    t.backlog = [];
    for (const p of pending) inlineRenderer.render(p.req).then(p.resolve, p.reject);
  }

  /**
   * What a stopped thread had in hand goes to the threads left (a new one is started): the request
   * it had started last fails with `failure` when one is given (it stalled or exhausted the heap).
   * After close() everything is finished inline, as before.
   */
  private hand(t: RenderThread, failure: string | null): void {
    if (this.closed) {
      this.rescue(t);
      return;
    }
    const pending = [...t.pending.entries()];
    t.pending.clear();
    t.backlog = [];
    for (const [id, p] of pending) {
      if (failure !== null && id === t.lastStarted) {
        this.replaced++;
        p.reject(new Error(`${RENDER_FAILED}${failure}`));
      } else this.render(p.req).then(p.resolve, p.reject);
    }
  }

  /** Every second: a thread with work in hand that has said nothing for stallMs is replaced. */
  private watch(): void {
    if (this.watchdog || this.stallMs <= 0) return;
    this.watchdog = setInterval(
      () => {
        const now = performance.now();
        this.threads.forEach((t, slot) => {
          if (!t?.ready || t.pending.size === 0 || now - t.lastHeardAt < this.stallMs) return;
          this.logger.error(
            { inHand: t.pending.size, stalledMs: Math.round(now - t.lastHeardAt) },
            'render thread stalled; replacing it',
          );
          this.threads[slot] = null;
          void t.worker.terminate();
          this.hand(t, `rendering took longer than ${this.stallMs / 1000} s (the render thread was replaced)`);
        });
      },
      Math.min(1_000, this.stallMs),
    );
    this.watchdog.unref();
  }
}

export function createRenderer(threads: number, logger: Logger): Renderer {
  return threads > 0 ? new RenderPool(threads, logger) : inlineRenderer;
}
