import type { Executor } from '../../db/executor.ts';
import type { WebhooksTable } from '../../db/schema.ts';
import { decryptSecret } from '../../lib/crypto.ts';
import { secretKey } from './sender.ts';
import { enabledWebhooks } from './webhooks.repo.ts';

/** What the dispatcher needs of one enabled webhook. */
export interface WebhookConfig {
  id: string;
  tenantId: string;
  url: string;
  /** null = every event type ("*"). */
  types: ReadonlySet<string> | null;
  policy: 'single' | 'batch';
  batchMaxSize: number;
  batchMaxWaitMs: number;
  /** Current secret's key first, then the previous one while it is still live. */
  keysAt(nowMs: number): Buffer[];
  /** Changes whenever the row changes (used to refresh lanes). */
  version: string;
}

export interface RegistrySnapshot {
  /** When the rows were read (start of the query). */
  loadedAt: number;
  /**
   * The snapshot is known to hold every webhook change committed before this time (the start of
   * the last load or of the last check that found nothing new).
   */
  validAt: number;
  /** Cheap change detector: row count and newest updated_at of the webhooks table. */
  stamp: string;
  byId: ReadonlyMap<string, WebhookConfig>;
  byTenant: ReadonlyMap<string, WebhookConfig[]>;
}

/**
 * The routing table of enabled webhooks, per tenant (docs/api.md "PATCH /v1/webhooks/{id}": a change is seen by
 * every node within 5 s). Every `checkMs` (100 ms) a one-row query (count, newest updated_at)
 * tells whether anything changed, and the table is reloaded when it did, or at the latest every
 * `maxAgeMs` (2 s; an update whose updated_at is older than the newest one would not move the
 * stamp). The node that made a change invalidates its copy at once. `validAt` lets fan-out route
 * only events created before it, so a webhook committed before an event is always in the table
 * that routes that event. Decrypted keys are kept by ciphertext: a reload decrypts only new ones.
 */
export class WebhookRegistry {
  private snapshot: RegistrySnapshot = { loadedAt: 0, validAt: 0, stamp: '', byId: new Map(), byTenant: new Map() };
  private loading: Promise<RegistrySnapshot> | null = null;
  private keyCache = new Map<string, Buffer>();

  constructor(
    private readonly db: Executor,
    private readonly masterKey: Buffer,
    private readonly maxAgeMs = 2000,
    private readonly checkMs = 100,
  ) {}

  /** The current table, checked for changes first when the last check is older than checkMs. */
  async get(): Promise<RegistrySnapshot> {
    if (Date.now() - this.snapshot.validAt < this.checkMs) return this.snapshot;
    this.loading ??= this.refresh().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  invalidate(): void {
    this.snapshot = { ...this.snapshot, loadedAt: 0, validAt: 0 };
  }

  private async stamp(): Promise<string> {
    const row = await this.db
      .selectFrom('webhooks')
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.max('updated_at').as('m')])
      .executeTakeFirst();
    return `${Number(row?.n ?? 0)}|${row?.m ?? ''}`;
  }

  private async refresh(): Promise<RegistrySnapshot> {
    const started = Date.now();
    const stamp = await this.stamp();
    if (stamp === this.snapshot.stamp && started - this.snapshot.loadedAt < this.maxAgeMs) {
      this.snapshot = { ...this.snapshot, validAt: started };
      return this.snapshot;
    }
    return this.load(started, stamp);
  }

  /** Enabled webhooks of `tenantId` subscribed to `type`. */
  static subscribers(snap: RegistrySnapshot, tenantId: string, type: string): WebhookConfig[] {
    const list = snap.byTenant.get(tenantId);
    if (!list) return [];
    return list.filter((w) => w.types === null || w.types.has(type));
  }

  private async load(started: number, stamp: string): Promise<RegistrySnapshot> {
    const rows = await enabledWebhooks(this.db);
    const byId = new Map<string, WebhookConfig>();
    const byTenant = new Map<string, WebhookConfig[]>();
    const keys = new Map<string, Buffer>();
    for (const row of rows) {
      const cfg = this.toConfig(row, keys);
      if (!cfg) continue;
      byId.set(cfg.id, cfg);
      const list = byTenant.get(cfg.tenantId) ?? [];
      list.push(cfg);
      byTenant.set(cfg.tenantId, list);
    }
    this.keyCache = keys;
    // Stamped before the rows were read: a change committed meanwhile moves the stamp again.
    this.snapshot = { loadedAt: started, validAt: started, stamp, byId, byTenant };
    return this.snapshot;
  }

  private key(sealed: string, keys: Map<string, Buffer>): Buffer {
    const k = this.keyCache.get(sealed) ?? secretKey(decryptSecret(this.masterKey, sealed));
    keys.set(sealed, k);
    return k;
  }

  private toConfig(row: WebhooksTable, keys: Map<string, Buffer>): WebhookConfig | null {
    let current: Buffer;
    let previous: Buffer | null = null;
    try {
      current = this.key(row.secret_enc, keys);
      if (row.previous_secret_enc) previous = this.key(row.previous_secret_enc, keys);
    } catch {
      // A secret sealed with another master key cannot sign anything: skip the webhook.
      return null;
    }
    const events = JSON.parse(row.events) as string[];
    const previousUntil = row.previous_secret_expires_at ? Date.parse(row.previous_secret_expires_at) : 0;
    return {
      id: row.id,
      tenantId: row.tenant_id,
      url: row.url,
      types: events.includes('*') ? null : new Set(events),
      policy: row.dispatch_policy,
      batchMaxSize: row.batch_max_size,
      batchMaxWaitMs: row.batch_max_wait_ms,
      keysAt: (now) => (previous && now < previousUntil ? [current, previous] : [current]),
      version: `${row.updated_at}|${row.url}|${row.secret_enc}|${row.events}|${row.dispatch_policy}`,
    };
  }
}
