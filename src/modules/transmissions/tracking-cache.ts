import { BoundedCache } from '../../lib/bounded-cache.ts';
import type { Executor } from '../../db/executor.ts';
import { getTrackingSettings, type TrackingSettings } from '../tracking/settings.ts';

/**
 * The tenants' tracking defaults as the accept path reads them, kept for a few seconds.
 *
 * Every accept needs its tenant's defaults (src/modules/tracking/settings.ts); on PostgreSQL each
 * read is a round trip that a whole group-commit batch waits for before its INSERT.
 * The defaults change rarely and only through PATCH /v1/tracking-settings, which calls
 * `forget` in this process once its UPDATE has committed, so this node's next accept reads the
 * new value. Other nodes keep theirs until it expires: an accept on another node may apply
 * the old defaults for up to `ttlMs` after the change (docs/tracking.md "What is tracked, by default"). The value
 * is stored with each transmission, so mail already accepted never changes either way.
 *
 * The cache holds the read's promise, so the accepts that miss at the same time share one read;
 * a failed read is dropped at once and the next accept asks again. Bounded: past `max` tenants
 * the least recently used entry goes.
 */
export class TrackingSettingsCache {
  private readonly entries: BoundedCache<string, { value: Promise<TrackingSettings>; expires: number }>;

  constructor(
    private readonly ttlMs = 5_000,
    max = 10_000,
  ) {
    this.entries = new BoundedCache(max);
  }

  get(db: Executor, tenantId: string): Promise<TrackingSettings> {
    const now = Date.now();
    const hit = this.entries.get(tenantId);
    if (hit && hit.expires > now) return hit.value;
    if (hit) this.entries.delete(tenantId);
    const value = getTrackingSettings(db, tenantId);
    const entry = { value, expires: now + this.ttlMs };
    this.entries.set(tenantId, entry);
    value.catch(() => {
      // Only this entry: a newer one (after forget) stays.
      if (this.entries.get(tenantId) === entry) this.entries.delete(tenantId);
    });
    return value;
  }

  /**
   * The tenant changed its defaults: call after that change committed (a read started before
   * then may still answer its own callers, but is no longer kept).
   */
  forget(tenantId: string): void {
    this.entries.delete(tenantId);
  }
}
