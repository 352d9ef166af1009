import { isIP } from 'node:net';
import type { Logger } from 'pino';
import { runSql } from '../../db/dialect.ts';
import type { Database } from '../../db/index.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { type Clock, isoAt, systemClock } from '../../lib/clock.ts';
import { RELEASE, SET_SOURCE } from '../outcomes/queue.sql.ts';
import { countWarmupFeedback, type WarmupPolicyRules, WarmupLedger } from '../warmup/ledger.ts';
import { allPoolsForRouting } from './ip-pools.repo.ts';
import { canonicalAddress } from './ip-pools.service.ts';
import { routingGeneration } from '../../db/routing-generation.ts';
import { type AddressRules, mayUse, policyAttachments, readAddressRules, warmupInForce } from './source-addresses.ts';

/**
 * Suspensions per destination site x source address: the pacing service implements it (its
 * automation rules suspend an address for a site, docs/pacing.md) and the delivery engine passes
 * it to createSourcePicker; without pacing nothing is suspended. Synchronous because it is asked once per domain queue on the delivery hot path:
 * an implementation keeps the suspensions in memory, refreshed from the database (all nodes).
 */
export interface SourceSuspensions {
  /** Epoch ms until which `address` must not send to `site`, or null when it may. */
  suspendedUntil(site: string, address: string): number | null;
}

export const noSuspensions: SourceSuspensions = { suspendedUntil: () => null };

/** Where a domain queue's messages go: the site, and the address families its MX hosts have. */
export interface Destination {
  site: string;
  /** 4 and/or 6; a host without resolved addresses counts as both. */
  families: ReadonlySet<number>;
}

interface Member {
  address: string;
  weight: number;
  policyId: string | null;
}

interface Pool {
  id: string;
  tenantId: string;
  overflow: string | null;
  members: Member[];
}

interface Table {
  pools: Map<string, Pool>;
  /** tenant -> mail type -> pool id; tenant -> default pool id. */
  byType: Map<string, Map<string, string>>;
  defaults: Map<string, string>;
  /** Which addresses are dedicated to whom (source-addresses.ts); the others are shared. */
  rules: AddressRules;
  /** Configured addresses no tenant has to itself: mail outside every pool leaves from these. */
  shared: string[];
  /** The warmup in force per address: its owner's (source-addresses.ts warmupInForce). */
  warmup: Map<string, WarmupPolicyRules>;
  /** The routing generation read before the tables: the table holds every change up to it. */
  generation: number;
  loadedAt: number;
}

type Decision = { kind: 'send'; address: string } | { kind: 'wait'; untilMs: number } | { kind: 'none' };

/** Smooth weighted round robin (nginx): exact shares in order, no randomness to flake. */
class Rotation {
  private readonly current = new Map<string, number>();

  next(members: readonly Member[]): Member | null {
    let total = 0;
    let best: Member | null = null;
    let bestScore = Number.NEGATIVE_INFINITY;
    for (const m of members) {
      const score = (this.current.get(m.address) ?? 0) + m.weight;
      this.current.set(m.address, score);
      total += m.weight;
      if (score > bestScore) {
        best = m;
        bestScore = score;
      }
    }
    if (best) this.current.set(best.address, bestScore - total);
    return best;
  }
}

export interface SourcePickerOptions {
  database: Database;
  workerId: string;
  logger: Logger;
  /** POSTYARD_SOURCE_ADDRESSES. Empty: every message leaves by the host's default route. */
  sourceAddresses: readonly string[];
  /** Its `address=tenant-id` entries (config.sourceDedications). */
  sourceDedications?: Readonly<Record<string, string>>;
  clock?: Clock;
  suspensions?: SourceSuspensions;
  /**
   * Most age of the routing table; default 5 s. Changes made through Postyard reach the node at
   * once (the routing generation); this only bounds how long a change made by hand in the
   * database may take.
   */
  refreshMs?: number;
}

/**
 * Chooses the source address of each claimed message (docs/ip-pools.md "Which address"):
 * the address it was sent from before (retries keep it), else options.ip_pool, the tenant's pool
 * for the mail type, its default pool, any shared address; by weight; skipping addresses the
 * tenant may not use (dedicated to another tenant), whose warmup cap is reached (then the
 * overflow pool) or that are suspended for the site.
 * The choice is written to messages.source_address before sending. Messages that must wait are
 * put back due at the time a slot opens, without an attempt counted: never dropped or failed.
 */
export class SourcePicker {
  private readonly configured: string[];
  private readonly dedications: Readonly<Record<string, string>>;
  private readonly ledger: WarmupLedger;
  private readonly clock: Clock;
  private readonly suspensions: SourceSuspensions;
  private readonly rotations = new Map<string, Rotation>();
  private readonly txInfo = new BoundedCache<string, { mailType: string; poolId: string | null }>(2000);
  private table: Table | null = null;
  private loading: Promise<Table> | null = null;

  constructor(private readonly o: SourcePickerOptions) {
    this.configured = [...new Set(o.sourceAddresses.map(canonicalAddress))];
    this.dedications = o.sourceDedications ?? {};
    this.clock = o.clock ?? systemClock;
    this.suspensions = o.suspensions ?? noSuspensions;
    this.ledger = new WarmupLedger(o.database.db, this.clock);
  }

  get enabled(): boolean {
    return this.configured.length > 0;
  }

  /** True when `address` may not send to `site` now. */
  suspended(site: string, address: string): boolean {
    const until = this.suspensions.suspendedUntil(site, address);
    return until !== null && until > this.clock.now();
  }

  /** True when `address` can send to `to` now: not suspended there, and of a family it has. */
  usableFor(to: Destination, address: string): boolean {
    return to.families.has(isIP(address)) && !this.suspended(to.site, address);
  }

  /** Picks addresses for a claimed batch; returns the messages to send now (others were put back). */
  async assign(claimed: MessagesTable[]): Promise<MessagesTable[]> {
    if (!this.enabled || claimed.length === 0) return claimed;
    return (await this.decide(claimed, null)).ready;
  }

  /**
   * Messages queued on an address that cannot send to `to` (suspended there, or of a family its MX
   * hosts lack): re-picked without it, or put back until a suspension or cap ends. When only the
   * family rules every address out, they keep theirs (the attempt then says why).
   */
  async moveOff(msgs: MessagesTable[], to: Destination): Promise<{ ready: MessagesTable[]; waiting: MessagesTable[] }> {
    return this.decide(msgs, to);
  }

  /** Sync bounces count against the address's warmup day (async ones: src/modules/feedback). */
  observe(kind: string, msg: MessagesTable): void {
    if (kind !== 'bounced' || !msg.source_address || !this.table?.warmup.has(msg.source_address)) return;
    countWarmupFeedback(this.o.database.db, msg.source_address, 'bounced', this.clock.now()).catch((err) =>
      this.o.logger.error({ err }, 'counting a warmup bounce failed'),
    );
  }

  private async decide(msgs: MessagesTable[], to: Destination | null) {
    const ready: MessagesTable[] = [];
    const waiting: MessagesTable[] = [];
    const moved = new Map<string | null, string[]>();
    const later = new Map<number, string[]>();
    const failed: MessagesTable[] = [];
    try {
      const table = await this.load();
      await this.loadTx(msgs);
      for (const msg of msgs) {
        let d: Decision;
        try {
          d = await this.pick(table, msg, to);
        } catch (err) {
          // Warmup slots could not be counted: not sent now (the lease brings it back), so a
          // database hiccup never lets an address pass its cap.
          this.o.logger.error({ err, message: msg.id }, 'choosing a source address failed');
          failed.push(msg);
          continue;
        }
        if (d.kind === 'wait') {
          later.set(d.untilMs, [...(later.get(d.untilMs) ?? []), msg.id]);
          waiting.push(msg);
          continue;
        }
        const address = d.kind === 'send' ? d.address : null;
        if (address !== (msg.source_address ?? null)) {
          // Null too: a message taken off an address it may no longer use says so in its row.
          msg.source_address = address;
          moved.set(address, [...(moved.get(address) ?? []), msg.id]);
        }
        ready.push(msg);
      }
      const db = this.o.database.db;
      for (const [address, ids] of moved) await runSql(db, SET_SOURCE, [address, ids.sort(), this.o.workerId]);
      // Back in the queue, due when a slot opens; no attempt counted.
      for (const [at, ids] of later) await runSql(db, RELEASE, [isoAt(at), this.o.workerId, ids.sort()]);
    } catch (err) {
      this.o.logger.error({ err }, 'source address assignment failed; the batch waits for its lease');
      return { ready: [], waiting: [...msgs] };
    }
    return { ready, waiting: [...waiting, ...failed] };
  }

  private async pick(table: Table, msg: MessagesTable, to: Destination | null): Promise<Decision> {
    const site = to?.site ?? null;
    // Never an address dedicated to another tenant, whatever a pool, a retry or a fallback says.
    const allowed = (a: string) => this.configured.includes(a) && mayUse(table.rules, msg.tenant_id, a);
    const usable = (a: string) => allowed(a) && (to === null || this.usableFor(to, a));
    // Nothing usable for the destination, and no suspension or cap to wait for: keep the address.
    const keep = (): Decision =>
      msg.source_address && allowed(msg.source_address)
        ? { kind: 'send', address: msg.source_address }
        : { kind: 'none' };
    let waitUntil = Number.POSITIVE_INFINITY;
    const take = async (address: string): Promise<boolean> => {
      const policy = table.warmup.get(address);
      if (!policy) return true;
      const r = await this.ledger.reserve(address, policy);
      if (!r.ok) waitUntil = Math.min(waitUntil, r.retryAtMs);
      return r.ok;
    };
    // Retries keep their address (receivers' greylisting and reputation follow it) unless it is
    // suspended for this site, no longer configured or now dedicated to another tenant; at its
    // warmup cap the retry waits for it.
    const kept = msg.source_address;
    if (kept && usable(kept)) return (await take(kept)) ? { kind: 'send', address: kept } : this.wait(waitUntil);

    const info = this.txInfo.get(msg.transmission_id);
    const first =
      (info?.poolId && table.pools.get(info.poolId)?.tenantId === msg.tenant_id ? info.poolId : null) ??
      table.byType.get(msg.tenant_id)?.get(info?.mailType ?? 'transactional') ??
      table.defaults.get(msg.tenant_id) ??
      null;
    let sawMember = false;
    const visited = new Set<string>();
    for (let id = first; id && !visited.has(id); id = table.pools.get(id)?.overflow ?? null) {
      visited.add(id);
      const pool = table.pools.get(id);
      if (!pool) break;
      const candidates = pool.members.filter((m) => usable(m.address));
      if (pool.members.some((m) => allowed(m.address))) sawMember = true;
      const address = await this.fromMembers(id, candidates, take);
      if (address) return { kind: 'send', address };
    }
    if (first && sawMember) {
      // Every address of the pool chain is capped or suspended: wait for the first to free up.
      if (waitUntil === Number.POSITIVE_INFINITY && site !== null) waitUntil = this.suspensionEnd(table, first, site);
      if (waitUntil === Number.POSITIVE_INFINITY && to !== null) return keep();
      return this.wait(waitUntil);
    }
    // No pool (or none of its addresses may be used): the shared addresses. Dedicated ones are
    // only ever used through their tenant's pools. None shared at all: the host's default route.
    if (table.shared.length === 0) return { kind: 'none' };
    const all = table.shared.filter(usable).map((address) => ({ address, weight: 1, policyId: null }));
    const address = await this.fromMembers('*', all, take);
    if (address) return { kind: 'send', address };
    if (waitUntil === Number.POSITIVE_INFINITY && site !== null)
      waitUntil = Math.min(
        ...table.shared.map((a) => this.suspensions.suspendedUntil(site, a) ?? Number.POSITIVE_INFINITY),
      );
    if (waitUntil === Number.POSITIVE_INFINITY && to !== null) return keep();
    return this.wait(waitUntil);
  }

  private wait(untilMs: number): Decision {
    // A floor of one minute: a clock set in the past must not make a message due again at once.
    const floor = Date.now() + 60_000;
    return { kind: 'wait', untilMs: Number.isFinite(untilMs) ? Math.max(untilMs, floor) : floor };
  }

  private suspensionEnd(table: Table, first: string, site: string): number {
    let end = Number.POSITIVE_INFINITY;
    for (let id: string | null = first, n = 0; id && n < 50; id = table.pools.get(id)?.overflow ?? null, n++)
      for (const m of table.pools.get(id)?.members ?? [])
        end = Math.min(end, this.suspensions.suspendedUntil(site, m.address) ?? end);
    return end;
  }

  /** Weighted choice among `members`, dropping those whose warmup slot is refused. */
  private async fromMembers(key: string, members: Member[], take: (a: string) => Promise<boolean>) {
    let left = members;
    let rotation = this.rotations.get(key);
    if (!rotation) {
      rotation = new Rotation();
      this.rotations.set(key, rotation);
    }
    while (left.length > 0) {
      const m = rotation.next(left);
      if (!m) return null;
      if (await take(m.address)) return m.address;
      left = left.filter((x) => x !== m);
    }
    return null;
  }

  private async loadTx(msgs: MessagesTable[]): Promise<void> {
    const missing = [...new Set(msgs.map((m) => m.transmission_id).filter((id) => !this.txInfo.get(id)))];
    for (let i = 0; i < missing.length; i += 500) {
      const rows = await this.o.database.db
        .selectFrom('transmissions')
        .select(['id', 'mail_type', 'options'])
        .where('id', 'in', missing.slice(i, i + 500))
        .execute();
      for (const r of rows) {
        const options = JSON.parse(r.options) as { ip_pool_id?: string };
        this.txInfo.set(r.id, { mailType: r.mail_type, poolId: options.ip_pool_id ?? null });
      }
    }
  }

  /**
   * The routing table, reloaded when the routing generation moved since it was read (a pool,
   * a dedication or a warmup policy changed, on any node) or when it is older than refreshMs: a
   * pool created before a message was claimed is always known when that message is picked.
   */
  private async load(): Promise<Table> {
    const generation = await routingGeneration(this.o.database.db);
    for (;;) {
      const t = this.table;
      if (t && t.generation >= generation && Date.now() - t.loadedAt < (this.o.refreshMs ?? 5000)) return t;
      this.loading ??= this.read().finally(() => {
        this.loading = null;
      });
      const loaded = await this.loading;
      if (!this.table || loaded.generation >= this.table.generation) this.table = loaded;
      // A load already under way may have read an older generation: then read again.
      if (loaded.generation >= generation) return loaded;
    }
  }

  private async read(): Promise<Table> {
    const db = this.o.database.db;
    // The generation first: whatever the tables say below holds at least every change up to it.
    const generation = await routingGeneration(db);
    const [{ pools, addresses }, rules, attachments] = await Promise.all([
      allPoolsForRouting(db),
      readAddressRules(db, { sourceAddresses: this.configured, sourceDedications: this.dedications }),
      policyAttachments(db),
    ]);
    const table: Table = {
      pools: new Map(),
      byType: new Map(),
      defaults: new Map(),
      rules,
      shared: this.configured.filter((a) => !rules.owners.has(a)),
      warmup: new Map(),
      generation,
      loadedAt: Date.now(),
    };
    for (const p of pools) {
      table.pools.set(p.id, { id: p.id, tenantId: p.tenant_id, overflow: p.overflow_pool_id, members: [] });
      if (p.is_default === 1) table.defaults.set(p.tenant_id, p.id);
      for (const type of JSON.parse(p.mail_types) as string[]) {
        const m = table.byType.get(p.tenant_id) ?? new Map<string, string>();
        m.set(type, p.id);
        table.byType.set(p.tenant_id, m);
      }
    }
    for (const a of addresses) {
      const pool = table.pools.get(a.pool_id);
      if (!pool || pool.tenantId !== a.tenant_id) continue;
      pool.members.push({ address: a.address, weight: a.weight, policyId: a.warmup_policy_id });
    }
    for (const address of this.configured) {
      const inForce = warmupInForce(rules, address, attachments);
      if (inForce) table.warmup.set(address, inForce.rules);
    }
    return table;
  }
}

/**
 * The picker of a delivery worker: `workerId` must be the worker's (writes are limited to rows it
 * holds). Pacing passes its suspensions here (src/modules/delivery/engine.ts).
 */
export function createSourcePicker(
  c: {
    database: Database;
    logger: Logger;
    config: { sourceAddresses: readonly string[]; sourceDedications: Readonly<Record<string, string>> };
  },
  workerId: string,
  opts: { clock?: Clock; suspensions?: SourceSuspensions; refreshMs?: number } = {},
): SourcePicker {
  return new SourcePicker({
    database: c.database,
    logger: c.logger,
    workerId,
    sourceAddresses: c.config.sourceAddresses,
    sourceDedications: c.config.sourceDedications,
    ...opts,
  });
}

/** Queue key of a recipient domain (or the relay) sent from `source`: a space never occurs in either. */
export const queueKey = (destination: string, source: string | null | undefined) =>
  source ? `${destination} ${source}` : destination;
export const destinationOf = (key: string) => key.split(' ')[0] ?? key;
