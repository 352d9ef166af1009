/**
 * What a tracking request records (docs/tracking.md): `message.opened`, `message.clicked` and
 * `message.unsubscribed` events, and the unsubscribe's suppression. Every write goes through the
 * group commit (src/db/group-commit.ts): on SQLite the requests of one event-loop turn share one
 * durable transaction, and each request is answered only after it committed.
 *
 * Clicks and opens come in bursts on the same few messages (a campaign's hot links), so two facts
 * are kept in memory (docs/tracking.md "Throughput"): the message's facts once they can no longer
 * change the event (FACTS_TTL_MS at most), and which (message, kind, link) already has its
 * `tracking_firsts` row (such a row is never removed while its message exists, so "seen" stays
 * true; another node inserting one meanwhile only means we try the insert once more). And the
 * URLs of version 2 click tokens, from their transmission's link table (tracking/links.ts).
 */
import type { GroupCommit } from '../../db/group-commit.ts';
import type { Executor } from '../../db/executor.ts';
import { nowIso } from '../../lib/clock.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { insertEvents } from '../events/events.repo.ts';
import type { NewEvent } from '../events/events.types.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { linkUrl } from './links.ts';
import { classify, SCANNER_CLICK_WINDOW_MS } from './machine.ts';

/** How long cached message facts are trusted (a deleted tenant's links stop recording by then). */
export const FACTS_TTL_MS = 5 * 60_000;
const FACTS_MAX = 20_000;
const FIRSTS_MAX = 100_000;
const LINKS_MAX = 20_000;
/** Most opens and clicks written in one transaction. */
const MAX_BATCH = 256;
/** States a message never leaves for `delivered` (so its click timing rule cannot apply later). */
const FINAL_UNDELIVERED = new Set(['bounced', 'failed', 'suppressed']);

export interface ClientInfo {
  ip: string;
  userAgent: string;
}

interface MessageFacts {
  tenant_id: string;
  id: string;
  transmission_id: string;
  recipient: string;
  recipient_role?: string | null;
  metadata: string | null;
  state: string;
  updated_at: string;
  mail_type: string;
  tags: string;
}

async function messageFacts(db: Executor, messageId: string): Promise<MessageFacts | undefined> {
  return db
    .selectFrom('messages as m')
    .innerJoin('transmissions as t', (j) =>
      j.onRef('t.id', '=', 'm.transmission_id').onRef('t.tenant_id', '=', 'm.tenant_id'),
    )
    .select([
      'm.tenant_id',
      'm.id',
      'm.transmission_id',
      'm.recipient',
      'm.recipient_role',
      'm.metadata',
      'm.state',
      'm.updated_at',
      't.mail_type',
      't.tags',
    ])
    .where('m.id', '=', messageId)
    .executeTakeFirst();
}

/** True when this is the first row for (message, kind, link): the event's `first`. */
async function markFirst(db: Executor, m: MessageFacts, kind: string, link: number): Promise<boolean> {
  const rows = await db
    .insertInto('tracking_firsts')
    .values({ tenant_id: m.tenant_id, message_id: m.id, kind, link, created_at: nowIso() })
    .onConflict((oc) => oc.columns(['message_id', 'kind', 'link']).doNothing())
    .returning('message_id')
    .execute();
  return rows.length > 0;
}

function eventBase(m: MessageFacts) {
  return {
    tenantId: m.tenant_id,
    transmissionId: m.transmission_id,
    messageId: m.id,
    recipient: m.recipient,
    mailType: m.mail_type,
    tags: JSON.parse(m.tags) as string[],
    metadata: m.metadata ?? '{}',
    role: m.recipient_role ?? null,
  };
}

interface CachedFacts {
  m: MessageFacts;
  base: ReturnType<typeof eventBase>;
  /** Date.parse(updated_at) when delivered, else null. */
  deliveredAt: number | null;
  expires: number;
}

/**
 * A click as its token says it: the link's position, and its URL (version 1) or its number in the
 * transmission's link table (version 2, token.ts).
 */
export type ClickTarget = { link: number; url: string } | { link: number; ref: number };

/** What a record found: null when its message (or, for a version 2 click, its link) does not exist. */
export type Recorded = { url: string | null } | null;

/**
 * The tenants whose tokens a request's host name honours (tracking.routes.ts): null = any (the
 * public URL's host), else the owners of the tracking host name it came to (often none).
 */
export type HonouredTenants = ReadonlySet<string> | null;

const honours = (tenants: HonouredTenants, tenantId: string) => tenants === null || tenants.has(tenantId);

/** The tenant of a message, or undefined when it does not exist. */
export async function messageTenant(db: Executor, messageId: string): Promise<string | undefined> {
  const row = await db.selectFrom('messages').select('tenant_id').where('id', '=', messageId).executeTakeFirst();
  return row?.tenant_id;
}

interface PendingRecord {
  kind: 'open' | 'click';
  messageId: string;
  client: ClientInfo;
  click?: ClickTarget | undefined;
  tenants: HonouredTenants;
  resolve(r: Recorded): void;
  reject(err: unknown): void;
}

const firstKey = (p: PendingRecord) => `${p.messageId}:${p.kind}:${p.click?.link ?? 0}`;

export class TrackingService {
  private pending: PendingRecord[] = [];
  private scheduled = false;
  private readonly facts = new BoundedCache<string, CachedFacts>(FACTS_MAX);
  private readonly firstsSeen = new BoundedCache<string, true>(FIRSTS_MAX);
  /**
   * `<transmission>:<idx>` -> URL. A link row never changes, and goes only with its transmission;
   * an entry is only read after the message's facts said the message exists, so it needs no
   * expiry of its own.
   */
  private readonly links = new BoundedCache<string, string>(LINKS_MAX);

  constructor(
    private readonly groupCommit: GroupCommit,
    private readonly suppressions: SuppressionsService,
  ) {}

  /**
   * The message's facts, from memory when they can no longer change what an event says: once
   * delivered longer ago than the scanner window, or in a state that never becomes delivered. A
   * queued or freshly delivered message is read every time (its state decides `machine`).
   */
  private async factsOf(db: Executor, messageId: string, now: number): Promise<CachedFacts | undefined> {
    const hit = this.facts.get(messageId);
    if (hit && hit.expires > now) return hit;
    const m = await messageFacts(db, messageId);
    if (!m) return undefined;
    const deliveredAt = m.state === 'delivered' ? Date.parse(m.updated_at) : null;
    const f: CachedFacts = { m, base: eventBase(m), deliveredAt, expires: now + FACTS_TTL_MS };
    const settled =
      (deliveredAt !== null && now - deliveredAt >= SCANNER_CLICK_WINDOW_MS) || FINAL_UNDELIVERED.has(m.state);
    if (settled) this.facts.set(messageId, f);
    return f;
  }

  /**
   * markFirst, skipping the insert when this node already saw the row. The key is remembered by
   * the caller only after its transaction committed: a shared group-commit transaction that
   * rolls back runs the unit again, and must insert the row again.
   */
  private async first(db: Executor, k: string, m: MessageFacts, kind: string, link: number): Promise<boolean> {
    if (this.firstsSeen.get(k)) return false;
    return markFirst(db, m, kind, link);
  }

  /** The URL of a click: the token's own (version 1), or its row of the link table (version 2). */
  private async clickUrl(db: Executor, m: MessageFacts, click: ClickTarget): Promise<string | undefined> {
    if ('url' in click) return click.url;
    const k = `${m.transmission_id}:${click.ref}`;
    const hit = this.links.get(k);
    if (hit !== undefined) return hit;
    const url = await linkUrl(db, m.tenant_id, m.transmission_id, click.ref);
    if (url !== undefined) this.links.set(k, url);
    return url;
  }

  /**
   * Records an open (`click` undefined) or a click; resolves after the event is durably stored,
   * with the click's URL. Null when the message does not exist (deleted, or never did), belongs
   * to a tenant the request's host does not honour (`tenants`), or a version 2 click's link row
   * does not exist: the caller answers exactly as for a bad token. The records of one event-loop
   * turn are written together: one transaction, one multi-row insert of their events.
   */
  record(
    kind: 'open' | 'click',
    messageId: string,
    client: ClientInfo,
    click?: ClickTarget,
    tenants: HonouredTenants = null,
  ) {
    return new Promise<Recorded>((resolve, reject) => {
      this.pending.push({ kind, messageId, client, click, tenants, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, MAX_BATCH);
    if (this.pending.length > 0) setImmediate(() => void this.flush());
    else this.scheduled = false;
    try {
      this.settle(batch, await this.groupCommit.run((trx) => this.write(trx, batch)));
    } catch {
      // One bad record must not lose its neighbours: each again in its own transaction.
      for (const p of batch) {
        try {
          this.settle([p], await this.groupCommit.run((trx) => this.write(trx, [p])));
        } catch (err) {
          p.reject(err);
        }
      }
    }
  }

  private settle(batch: PendingRecord[], results: Recorded[]): void {
    for (const [i, p] of batch.entries()) {
      const r = results[i] ?? null;
      if (r) this.firstsSeen.set(firstKey(p), true);
      p.resolve(r);
    }
  }

  /** The batch's rows, in the caller's transaction; per record what it found (see record). */
  private async write(trx: Executor, batch: PendingRecord[]): Promise<Recorded[]> {
    const now = Date.now();
    const out: Recorded[] = [];
    const events: NewEvent[] = [];
    for (const p of batch) {
      const found = await this.factsOf(trx, p.messageId, now);
      const f = found && honours(p.tenants, found.m.tenant_id) ? found : undefined;
      const url = f && p.click ? await this.clickUrl(trx, f.m, p.click) : null;
      if (!f || url === undefined) {
        out.push(null);
        continue;
      }
      out.push({ url });
      const { kind, client, click } = p;
      const since = f.deliveredAt === null ? null : now - f.deliveredAt;
      const { machine } = classify({ kind, ip: client.ip, userAgent: client.userAgent, sinceDeliveryMs: since });
      const first = await this.first(trx, firstKey(p), f.m, kind, click?.link ?? 0);
      const data =
        kind === 'click'
          ? { user_agent: client.userAgent, ip: client.ip, url: url ?? '', first, machine }
          : { user_agent: client.userAgent, ip: client.ip, first, machine };
      events.push({ ...f.base, type: kind === 'click' ? 'message.clicked' : 'message.opened', data });
    }
    await insertEvents(trx, events);
    return out;
  }

  /**
   * Suppresses the message's recipient for marketing mail (`reason_category` and `source`
   * `unsubscribe`, scope `marketing`) and emits `message.unsubscribed` once per message (Gmail
   * may POST more than once). False when the message does not exist, or belongs to a tenant the
   * request's host does not honour.
   */
  unsubscribe(
    messageId: string,
    method: 'one_click' | 'page' | 'mailto',
    client: ClientInfo,
    tenants: HonouredTenants = null,
  ) {
    return this.groupCommit.run(async (trx) => {
      const m = await messageFacts(trx, messageId);
      if (!m || !honours(tenants, m.tenant_id)) return false;
      const s = await this.suppressions.addAutomatic(trx, m.tenant_id, {
        identifier: m.recipient,
        reason_category: 'unsubscribe',
        source: 'unsubscribe',
        scope: 'marketing',
        description: `unsubscribed (${method})`,
      });
      if (await markFirst(trx, m, 'unsubscribe', 0)) {
        await insertEvents(trx, [
          {
            ...eventBase(m),
            type: 'message.unsubscribed',
            data: { method, suppression_id: s.id, user_agent: client.userAgent, ip: client.ip },
          },
        ]);
      }
      return true;
    });
  }
}
