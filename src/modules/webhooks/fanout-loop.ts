import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import { isoAt } from '../../lib/clock.ts';
import type { EventBodyCache } from './event-cache.ts';
import { analyzeQueue, fanOut } from './queue.repo.ts';
import { type RegistrySnapshot, WebhookRegistry } from './registry.ts';

export interface FanOutHooks {
  /** Every round starts with the current registry snapshot (the dispatcher syncs its lanes). */
  onSnapshot(snap: RegistrySnapshot): void;
  /** The webhook's lane is sending now (not failing, paused or gone): worth caching events for. */
  isSending(webhookId: string, now: number): boolean;
  /** Events were queued for these webhooks (count per webhook). */
  onQueued(queued: ReadonlyMap<string, number>): void;
}

/**
 * The dispatcher's fan-out loop: rounds of up to `batch` outbox rows turned into delivery units
 * (queue.repo.ts fanOut), back to back while the outbox is full, else every `intervalMs`. The
 * routed events' JSON goes into the event cache for the lanes that are sending.
 */
export class FanOutLoop {
  private timer: NodeJS.Timeout | null = null;
  /** Paused because the event cache is more than half full (see schedule). */
  private parked = false;
  private running: Promise<void> | null = null;
  private stopped = true;
  private queuedSinceAnalyze = 0;
  private lastAnalyze = 0;

  constructor(
    private readonly database: Database,
    private readonly registry: WebhookRegistry,
    private readonly logger: Logger,
    private readonly bodies: EventBodyCache,
    private readonly o: { batch: number; intervalMs: number },
    private readonly hooks: FanOutHooks,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => {});
  }

  /** The lanes took events from the cache: resume a parked fan-out if there is room again. */
  wake(): void {
    if (!this.parked || !this.bodies.roomy || !this.timer) return;
    clearTimeout(this.timer);
    this.schedule(0);
  }

  private schedule(ms: number) {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.parked = false;
      this.running = this.once()
        .then((claimed) => {
          // A full round means more is waiting: go on at once, unless fan-out is already so far
          // ahead of delivery that the event cache is filling up (see event-cache.ts); then the
          // lanes wake it as soon as they have taken enough, at the latest after the interval.
          const more = claimed >= this.o.batch;
          this.parked = more && !this.bodies.roomy;
          this.schedule(more && !this.parked ? 0 : this.o.intervalMs);
        })
        .catch((err) => {
          this.logger.error({ err }, 'webhook fan-out failed');
          this.schedule(1000);
        });
    }, ms);
    this.timer.unref();
  }

  /** One fan-out round. Returns the outbox rows consumed. */
  async once(): Promise<number> {
    const snap = await this.registry.get();
    this.hooks.onSnapshot(snap);
    const route = (tenantId: string, type: string) => WebhookRegistry.subscribers(snap, tenantId, type);
    const now = Date.now();
    const { claimed, queued, routed } = await fanOut(
      this.database,
      this.o.batch,
      route,
      isoAt(now),
      isoAt(snap.validAt),
    );
    this.bodies.sweep(now);
    // Kept for the lanes that are sending now; a failing or paused lane reads its events later.
    for (const r of routed) {
      let refs = 0;
      for (const id of r.webhookIds) if (this.hooks.isSending(id, now)) refs++;
      if (refs) this.bodies.add(r.id, r.body, refs, now);
    }
    for (const n of queued.values()) this.queuedSinceAnalyze += n;
    if (queued.size) this.hooks.onQueued(queued);
    if (this.queuedSinceAnalyze >= 10_000 && Date.now() - this.lastAnalyze > 30_000) {
      this.queuedSinceAnalyze = 0;
      this.lastAnalyze = Date.now();
      await analyzeQueue(this.database);
    }
    return claimed;
  }
}
