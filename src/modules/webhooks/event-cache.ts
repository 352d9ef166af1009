/**
 * JSON bodies of events this node has just fanned out, kept until the lanes that will deliver
 * them have built their POSTs. Fan-out reads each event whole anyway (to route it), so keeping
 * its JSON spares a second read of the events table and a second serialization per delivery;
 * without it, that read was the largest single cost of a delivered event (bench:webhooks).
 *
 * Only an optimization: the delivery units in the database stay the truth. An event not found
 * here (another node fanned it out, a retry, a restart, an entry dropped) is read from the
 * database as before; events never change once written, so an entry cannot be stale.
 *
 * Bounded: an entry lives until each webhook it was routed to has taken it (`refs`), or `ttlMs`
 * (a paused or dead endpoint's events must not hold memory); when `maxChars` is reached new
 * entries are not kept (rather than dropping older ones, which are the next to be delivered).
 * Kept small on purpose (4 M characters): entries that live long are promoted to V8's old generation,
 * and collecting them cost more than reading the events again; fan-out waits for the lanes
 * rather than run far ahead while the cache is more than half full (`roomy`).
 */
interface Entry {
  json: string;
  refs: number;
  at: number;
}

export class EventBodyCache {
  private readonly map = new Map<string, Entry>();
  private chars = 0;

  constructor(
    private readonly maxChars = 4 * 1024 * 1024,
    private readonly ttlMs = 60_000,
  ) {}

  get size(): number {
    return this.map.size;
  }

  /** Less than half full: fan-out may run ahead of delivery without its events missing here. */
  get roomy(): boolean {
    return this.chars < this.maxChars / 2;
  }

  /** Keeps `json` for `refs` takers, if there is room. */
  add(id: string, json: string, refs: number, now: number): void {
    if (refs <= 0 || this.chars + json.length > this.maxChars || this.map.has(id)) return;
    this.map.set(id, { json, refs, at: now });
    this.chars += json.length;
  }

  /** The JSON of `id` for one taker (the entry goes once every taker has had it). */
  take(id: string): string | undefined {
    const e = this.map.get(id);
    if (!e) return undefined;
    if (--e.refs <= 0) this.drop(id, e);
    return e.json;
  }

  /** Drops entries older than ttlMs (the map is in insertion order, i.e. oldest first). */
  sweep(now: number): void {
    for (const [id, e] of this.map) {
      if (now - e.at < this.ttlMs) break;
      this.drop(id, e);
    }
  }

  clear(): void {
    this.map.clear();
    this.chars = 0;
  }

  private drop(id: string, e: Entry) {
    this.map.delete(id);
    this.chars -= e.json.length;
  }
}
