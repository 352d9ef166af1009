import type { Route } from './destination.ts';
import type { DomainQueue } from './worker-types.ts';

/**
 * Connection slots and sessions shared by the destinations of one bucket (site x source address
 * x tenant scope; docs/pacing.md "Destinations sharing a site").
 *
 * Slots are counted per site, queues and lanes are per recipient domain. A lane used to keep its
 * session (and its slot) while its domain's queue had mail, up to messages_per_connection (1,000
 * for unknown sites): one tenant's 3,000 marketing messages to one domain held all 5 slots of its
 * site until the last of them had gone, and another tenant's password reset to another domain on
 * the same MX waited behind all of them. Now a destination with mail and no session
 * on this node is **starving**, and:
 *
 * - a lane of the same bucket gives it its session between two messages (what it rendered ahead
 *   goes back to its own queue): at once when the starving destination's mail is more urgent
 *   (transactional against the lane's marketing), else once the lane has carried
 *   HANDOVER_MIN_MESSAGES for its destination or served it HANDOVER_MIN_MS, so sessions change
 *   hands once per that many messages at most, never once per message, even with one slot;
 * - when the session's host is the starving destination's first MX host (same port and address,
 *   same TLS policy), the lane goes on to that destination on the open session, as it does when
 *   its own destination has no more mail; else the session ends and the slot goes to a new
 *   session of the starving one;
 * - a destination that has a session does not open another while one of its bucket starves, nor
 *   does any while a lane's slot is on its way to one (PROMISE_MS).
 *
 * Which node holds the slots is not changed: on PostgreSQL a slot given up may be taken by another
 * node's session, and the starving destination waits for the next.
 */
export const HANDOVER_MIN_MESSAGES = 50;
export const HANDOVER_MIN_MS = 5_000;
/** How long a slot given up for a starving destination is kept for it. */
const PROMISE_MS = 2_000;

/** Where a lane sends: a destination's queue (its key in the worker's map) and route. */
export interface LaneTarget {
  key: string;
  q: DomainQueue;
  route: Route;
}

/** The far end of a lane's open session, and the route it was opened for. */
export interface SessionEnd {
  host: string;
  address: string | null;
  route: Route;
}

/** What a lane has carried for its current destination, and since when (epoch ms). */
export interface Turn {
  sent: number;
  since: number;
}

/**
 * The route `q` last resolved, if a session opened to `at` may carry its mail: the same first MX
 * host, port and (when known) address, and the same TLS requirements, so the session is what a
 * session of its own would have been.
 */
export function reaches(q: DomainQueue, at: SessionEnd): Route | null {
  const route = q.resolved;
  const first = route?.hosts[0];
  const opened = at.route.hosts.find((h) => h.host === at.host);
  if (!route || !first || !opened || route.relay || at.route.relay) return null;
  if (first.host !== at.host || first.port !== opened.port) return null;
  if (at.address !== null && first.addresses.length > 0 && !first.addresses.includes(at.address)) return null;
  const [a, b] = [route.tls, at.route.tls];
  return a.tlsMode === b.tlsMode && (a.verifyCertificate ?? false) === (b.verifyCertificate ?? false) ? route : null;
}

/**
 * A session may carry both queues' mail: neither is a tenant's own (pacing overrides: such a
 * tenant's sessions carry only its mail, docs/pacing.md), or both are the same tenant's.
 */
function sameTenancy(x: DomainQueue, y: DomainQueue): boolean {
  return (x.tenant ?? null) === (y.tenant ?? null);
}

export class SlotHandover {
  /** Per bucket, the destinations that asked for one of its slots in vain, with their queue keys. */
  private readonly waiting = new Map<string, Map<DomainQueue, string>>();
  /** Each waiting queue's bucket, so a queue waits on one bucket only (its route's latest). */
  private readonly bucketOf = new Map<DomainQueue, string>();
  /** Starving queues a lane has given its slot or session to, and when. */
  private readonly promised = new Map<DomainQueue, number>();

  /** `emptied`: a lane moved off a queue that has neither mail nor lanes left (the worker drops it). */
  constructor(private readonly emptied: (key: string, q: DomainQueue) => void = () => {}) {}

  /** `q` (key `key`) asked for a slot of `bucket` and got none, or left it to a starving one. */
  waits(bucket: string, key: string, q: DomainQueue): void {
    const before = this.bucketOf.get(q);
    if (before !== undefined && before !== bucket) this.forget(q);
    let queues = this.waiting.get(bucket);
    if (!queues) this.waiting.set(bucket, (queues = new Map()));
    queues.set(q, key);
    this.bucketOf.set(q, bucket);
  }

  /** `q` got a slot or a session (it may wait again for more), or the worker dropped it. */
  forget(q: DomainQueue): void {
    const bucket = this.bucketOf.get(q);
    if (bucket === undefined) return;
    this.bucketOf.delete(q);
    this.promised.delete(q);
    const queues = this.waiting.get(bucket);
    queues?.delete(q);
    if (queues?.size === 0) this.waiting.delete(bucket);
  }

  /**
   * Should `q` leave the next free slot of `bucket` to a starving destination? Yes when `q` has a
   * session already, or a lane gave up its slot for that destination (the lane's own queue,
   * asking first, would otherwise take it straight back).
   */
  leavesSlot(bucket: string, q: DomainQueue, now = Date.now()): boolean {
    const starving = this.starving(bucket, q);
    if (!starving) return false;
    return q.lanes > 0 || this.isPromised(starving.q, now);
  }

  /**
   * The decision for a lane of `t` on `bucket` between two messages: null to carry on, 'end' to
   * close the session for a starving destination's own, or the starving destination to go on to
   * over this session (move(), once what the lane rendered ahead is back on its queue). `next`:
   * the priority of the lane's next message (its queue's head counts too).
   */
  handOver(
    t: LaneTarget,
    bucket: string,
    next: number,
    turn: Turn,
    at: SessionEnd,
    now = Date.now(),
  ): 'end' | LaneTarget | null {
    const starving = this.starving(bucket, t.q);
    if (!starving || this.isPromised(starving.q, now)) return null;
    const mine = Math.min(next, t.q.jobs.topPriority() ?? next);
    const urgent = (starving.q.jobs.topPriority() ?? Number.POSITIVE_INFINITY) < mine;
    if (!urgent && turn.sent < HANDOVER_MIN_MESSAGES && now - turn.since < HANDOVER_MIN_MS) return null;
    this.promised.set(starving.q, now);
    const route = sameTenancy(t.q, starving.q) ? reaches(starving.q, at) : null;
    return route ? { ...starving, route } : 'end';
  }

  /**
   * The lane's destination `t` has no more mail: a destination of `bucket` waiting for a session
   * that the open one reaches (starving ones first, the most urgent first), or null.
   */
  carryOn(t: LaneTarget, bucket: string, at: SessionEnd): LaneTarget | null {
    for (const [key, q] of this.waitersOf(bucket)) {
      if (q === t.q || q.jobs.length === 0 || !sameTenancy(t.q, q)) continue;
      const route = reaches(q, at);
      if (route) return { key, q, route };
    }
    return null;
  }

  /**
   * The lane of `t` goes on with `to` over its session (`t` then names it). Its old destination,
   * if it has mail left, waits for a session again (the lane may come back, and a slot that frees
   * is offered to it); else, with no lane left either, it is handed to `emptied`.
   */
  move(t: LaneTarget, bucket: string, to: LaneTarget): void {
    const { key, q } = t;
    q.lanes--;
    to.q.lanes++;
    this.forget(to.q);
    Object.assign(t, to);
    if (q.jobs.length > 0) this.waits(bucket, key, q);
    else if (q.lanes === 0 && !q.opening) this.emptied(key, q);
  }

  /** The destinations waiting for a slot of `bucket`: starving ones first, most urgent first. */
  waitersOf(bucket: string): [string, DomainQueue][] {
    const queues = this.waiting.get(bucket);
    if (!queues) return [];
    const rank = (q: DomainQueue) => (q.lanes > 0 ? 2 : 0) + (q.jobs.topPriority() ?? 1);
    return [...queues].sort(([x], [y]) => rank(x) - rank(y)).map(([q, key]) => [key, q]);
  }

  /**
   * A starving destination of `bucket` other than `q` (mail, no session here), the most urgent;
   * entries with no mail left are dropped on the way.
   */
  private starving(bucket: string, q: DomainQueue): { key: string; q: DomainQueue } | null {
    const queues = this.waiting.get(bucket);
    if (!queues) return null;
    let best: { key: string; q: DomainQueue } | null = null;
    let bestPriority = Number.POSITIVE_INFINITY;
    for (const [other, key] of queues) {
      const top = other.jobs.topPriority();
      if (top === null) {
        this.forget(other);
        continue;
      }
      if (other === q || other.lanes > 0) continue;
      if (top < bestPriority) {
        best = { key, q: other };
        bestPriority = top;
      }
    }
    return best;
  }

  private isPromised(q: DomainQueue, now: number): boolean {
    const at = this.promised.get(q);
    return at !== undefined && now - at < PROMISE_MS;
  }
}
