import type { Executor } from '../../db/executor.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { LRUCache } from 'lru-cache';
import { trackingPlan } from '../tracking/render-plan.ts';
import { type DeliveryTransmission, loadTransmission, loadTransmissions } from './queue.repo.ts';
import { forDelivery } from './render/renderer.ts';
import type { Job } from './worker-types.ts';

/** Transmissions kept, and their stored size at most (content and raw message, as loaded). */
const MAX_TRANSMISSIONS = 4096;
export const TRANSMISSION_CACHE_BYTES = 64 * 1024 * 1024;
/** One-recipient transmissions a claim's prefetch loaded, held until their one message takes them. */
const MAX_HANDED_OVER = 1024;

/**
 * The worker's transmissions as delivery needs them (content parsed for rendering, tracking plan,
 * tags), kept for the next messages of the same transmission: a transmission of 10,000
 * recipients is loaded once, not 10,000 times. Least recently used dropped first.
 *
 * Bounded by bytes as well as count: fair claims serve tenants in turn, so with 1,000
 * tenants a transmission comes back after ~1,000 others, and the 500 it kept before were all
 * loaded and parsed again on every turn; and 500 transmissions with 25 MB attachments were 12 GB.
 *
 * A transmission of one recipient is not kept: its one message is the only one that will ask for
 * it (a retry loads it again). Kept, 4,096 of them filled the cache with ~10 MB that nothing read
 * again, each entry living long enough to be promoted to V8's old generation before the next
 * ones pushed it out: in the PostgreSQL soak (one recipient per transmission) the server's heap
 * grew (docs/benchmarks.md "Session 2026-12-07"). The claim's prefetch hands
 * such a transmission to its message (`handedOver`, taken on the first read) instead.
 */
export class TransmissionCache {
  private readonly cache: LRUCache<string, Job['tx']>;
  private readonly handedOver = new LRUCache<string, Job['tx']>({ max: MAX_HANDED_OVER });

  constructor(
    private readonly db: () => Executor,
    private readonly tracking: { base: string; key: Uint8Array } | null | undefined,
    maxBytes: number = TRANSMISSION_CACHE_BYTES,
  ) {
    this.cache = new LRUCache<string, Job['tx']>({ max: MAX_TRANSMISSIONS, maxSize: maxBytes });
  }

  /** Transmissions kept and their stored bytes; one-recipient ones loaded and not taken yet (tests). */
  stats(): { entries: number; bytes: number; handedOver: number } {
    return { entries: this.cache.size, bytes: this.cache.calculatedSize, handedOver: this.handedOver.size };
  }

  /** The message's transmission; null if it no longer exists. */
  async of(msg: MessagesTable): Promise<Job['tx'] | null> {
    const hit = this.cache.get(msg.transmission_id);
    if (hit) return hit;
    const once = this.handedOver.get(msg.transmission_id);
    if (once) {
      this.handedOver.delete(msg.transmission_id);
      return once;
    }
    const row = await loadTransmission(this.db(), msg.tenant_id, msg.transmission_id);
    return row ? this.keep(row, false) : null;
  }

  /**
   * The claim's transmissions that are not cached yet, in one batch (loadTransmissions) instead of
   * one round trip each while the rest of the claim waits: with one recipient per transmission, a
   * claim of 200 was 200 sequential statements, a large part of delivery's time on PostgreSQL.
   */
  async prefetch(claimed: readonly MessagesTable[]): Promise<void> {
    const missing = claimed.filter(
      (m) => this.cache.get(m.transmission_id) === undefined && !this.handedOver.has(m.transmission_id),
    );
    if (missing.length < 2) return;
    const rows = await loadTransmissions(this.db(), missing);
    for (const row of rows.values()) this.keep(row, true);
  }

  /** Parses `row`; keeps it unless it has one recipient, which `handOver` holds for its message. */
  private keep(row: DeliveryTransmission, handOver: boolean): Job['tx'] {
    const base = forDelivery(row);
    const tags = JSON.parse(row.tags) as string[];
    const tracking = this.tracking
      ? trackingPlan(this.tracking, {
          tenant_id: row.tenant_id,
          mail_type: row.mail_type,
          tags,
          options: base.options,
        })
      : null;
    const tx = {
      ...base,
      options: { ...base.options, tracking },
      mailType: row.mail_type,
      tags,
      createdAtMs: Date.parse(row.created_at),
    };
    if (row.total_accepted <= 1) {
      if (handOver) this.handedOver.set(row.id, tx);
      return tx;
    }
    // What was loaded: the content's JSON (parsed, about as large), the raw message (decoded).
    const size =
      1024 + row.content.length + (row.raw_message?.length ?? 0) + (row.tracking_links?.join('').length ?? 0);
    this.cache.set(row.id, tx, { size });
    return tx;
  }
}
