/**
 * What a node does with claimed mail for a site whose connection slots are all held by other
 * nodes (docs/pacing.md "When another node holds every slot"). It asks for a slot again every
 * SLOT_RETRY_MS; after waiting its patience without getting one it hands the messages back to
 * the queue, due at once and without counting an attempt, so a node that holds the slots (and is
 * sending to that site now) claims them, instead of their waiting in this node's memory for most
 * of their lease (5 minutes by default).
 *
 * Against a hand-back/claim ping-pong:
 * - the node that handed messages back passes their tenants over in its claims for
 *   HANDBACK_SKIP_MS (at least a few of its poll intervals), so the other nodes get the first go
 *   (their mail to other sites waits for those nodes, or for this one after the pause);
 * - when the same bucket is handed back again before this node got a slot of it (the slot
 *   holders had no room to claim them, so this node took them again), its patience doubles, up to
 *   SLOT_WAIT_MAX_MS: a large backlog for a site that other nodes keep busy is not moved back and
 *   forth every few seconds.
 */

/** How soon a queue whose site's connection slots are all held by other nodes asks again. */
export const SLOT_RETRY_MS = 500;
/** How long a queue waits for a slot held by other nodes before handing its messages back. */
export const SLOT_WAIT_MS = 3_000;
/** The longest wait, after hand-backs of one bucket in a row without a slot in between. */
export const SLOT_WAIT_MAX_MS = 60_000;
/** How long the node that handed messages back leaves their tenants to the other nodes' claims. */
export const HANDBACK_SKIP_MS = 2_000;

export class SlotWaits {
  /** Hand-backs of a bucket since this node last got one of its slots, and when the last was. */
  private readonly streaks = new Map<string, { count: number; at: number }>();
  /** Tenant -> until when this node's claims pass it over. */
  private readonly skipping = new Map<string, number>();
  private readonly skipMs: number;

  constructor(pollMs: number) {
    this.skipMs = Math.max(HANDBACK_SKIP_MS, 4 * pollMs);
  }

  /** How long a queue of `bucket` waits for a slot before its messages go back. */
  patience(bucket: string, now = Date.now()): number {
    const s = this.streaks.get(bucket);
    // A streak this old is over: the bucket's slots came free meanwhile, or nobody sent there.
    const count = s && now - s.at < 2 * SLOT_WAIT_MAX_MS ? s.count : 0;
    return Math.min(SLOT_WAIT_MS * 2 ** count, SLOT_WAIT_MAX_MS);
  }

  /** Messages of `tenants` waiting for a slot of `bucket` went back to the queue. */
  handedBack(bucket: string, tenants: Iterable<string>, now = Date.now()): void {
    const s = this.streaks.get(bucket);
    const count = s && now - s.at < 2 * SLOT_WAIT_MAX_MS ? s.count + 1 : 1;
    this.streaks.delete(bucket);
    this.streaks.set(bucket, { count, at: now });
    // Insertion order is age order: drop streaks that are over.
    for (const [b, v] of this.streaks) {
      if (now - v.at < 2 * SLOT_WAIT_MAX_MS) break;
      this.streaks.delete(b);
    }
    for (const t of tenants) this.skipping.set(t, now + this.skipMs);
  }

  /** This node got a slot of `bucket`: a later wait for it starts from SLOT_WAIT_MS again. */
  acquired(bucket: string): void {
    if (this.streaks.size > 0) this.streaks.delete(bucket);
  }

  /** Adds to `skip` the tenants this node's claims pass over now (see HANDBACK_SKIP_MS). */
  addSkipped(skip: Set<string>, now = Date.now()): Set<string> {
    for (const [t, until] of this.skipping) {
      if (until <= now) this.skipping.delete(t);
      else skip.add(t);
    }
    return skip;
  }
}
