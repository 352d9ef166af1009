import { describe, expect, it } from 'vitest';
import type { Route } from './destination.ts';
import { FairQueue } from './fair-queue.ts';
import { HANDOVER_MIN_MESSAGES, HANDOVER_MIN_MS, type LaneTarget, SlotHandover } from './slot-handover.ts';
import type { DomainQueue, Job } from './worker-types.ts';

/** The rules by which a lane gives its session to another destination of its site (slot-handover.ts). */
const BUCKET = 'example.net|';

function route(host = 'mx1.example.net', tlsMode: 'opportunistic' | 'required' = 'opportunistic'): Route {
  return {
    site: 'example.net',
    profile: 'default',
    limits: { maxConnections: 1, maxMessagesPerConnection: 1000, messagesPerMinute: 1e6, messagesPerHour: 1e6 },
    hosts: [{ host, addresses: ['127.0.0.1'], port: 25 }],
    relay: null,
    tls: { tlsMode },
    mtaSts: null,
  };
}

function queue(priorities: number[], lanes = 0, resolved: Route = route(), tenant?: string): DomainQueue {
  const jobs = new FairQueue<Job>();
  for (const priority of priorities) jobs.push({ tenant: 't', priority } as Job);
  return { jobs, lanes, route: null, resolved, ...(tenant ? { tenant } : {}) };
}

const lane = (q: DomainQueue, key = 'a.test'): LaneTarget => ({ key, q, route: q.resolved as Route });
const at = (r: Route = route()) => ({ host: r.hosts[0]?.host as string, address: '127.0.0.1', route: r });
const fresh = (now: number) => ({ sent: 1, since: now });

describe('slot hand-over between destinations of one site', () => {
  it('a marketing lane gives its session at once to a starving destination with transactional mail', () => {
    const h = new SlotHandover();
    const a = queue([1, 1, 1], 1);
    const b = queue([0]);
    h.waits(BUCKET, 'b.test', b);
    const now = Date.now();
    const to = h.handOver(lane(a), BUCKET, 1, fresh(now), at(), now);
    expect(to).toMatchObject({ key: 'b.test', q: b });
    // One lane per starving destination: the next lane to ask keeps its session.
    expect(h.handOver(lane(a), BUCKET, 1, fresh(now), at(), now)).toBeNull();
  });

  it('between mail of the same priority, only after a turn of HANDOVER_MIN_MESSAGES or HANDOVER_MIN_MS', () => {
    const h = new SlotHandover();
    const a = queue([1, 1], 1);
    const b = queue([1]);
    h.waits(BUCKET, 'b.test', b);
    const now = Date.now();
    expect(h.handOver(lane(a), BUCKET, 1, { sent: HANDOVER_MIN_MESSAGES - 1, since: now }, at(), now)).toBeNull();
    expect(h.handOver(lane(a), BUCKET, 1, { sent: 0, since: now - HANDOVER_MIN_MS }, at(), now)).not.toBeNull();
    // A transactional lane does not give way to marketing before its turn either.
    const c = queue([0], 1);
    const d = queue([1]);
    h.waits(BUCKET, 'd.test', d);
    expect(h.handOver(lane(c), BUCKET, 0, fresh(now), at(), now)).toBeNull();
  });

  it('ends the session instead when it does not reach the starving destination (other host, TLS policy, tenant)', () => {
    const now = Date.now();
    for (const b of [
      queue([0], 0, route('mx2.example.net')),
      queue([0], 0, route('mx1.example.net', 'required')),
      queue([0], 0, route(), 'tenant-with-overrides'),
    ]) {
      const h = new SlotHandover();
      h.waits(BUCKET, 'b.test', b);
      expect(h.handOver(lane(queue([1], 1)), BUCKET, 1, fresh(now), at(), now)).toBe('end');
    }
  });

  it('while a destination starves, one that has a session opens no other; the slot freed for it is its own', () => {
    const h = new SlotHandover();
    const a = queue([1, 1], 1);
    const b = queue([0]);
    h.waits(BUCKET, 'b.test', b);
    expect(h.leavesSlot(BUCKET, a)).toBe(true);
    // The lane that gave up its slot for b leaves its own queue with no lane: it still waits for b.
    const now = Date.now();
    expect(h.handOver(lane(a), BUCKET, 1, fresh(now), at(route('mx2.example.net')), now)).toBe('end');
    a.lanes = 0;
    expect(h.leavesSlot(BUCKET, a, now)).toBe(true);
    expect(h.leavesSlot(BUCKET, b, now)).toBe(false);
    // Once b has a session, nobody waits for it.
    h.forget(b);
    expect(h.leavesSlot(BUCKET, a, now)).toBe(false);
  });

  it('a lane whose destination ran dry carries on with a waiting one it reaches, starving ones first', () => {
    const dropped: string[] = [];
    const h = new SlotHandover((key) => dropped.push(key));
    const a = queue([], 1);
    const more = queue([1], 2);
    const starving = queue([1]);
    h.waits(BUCKET, 'more.test', more);
    h.waits(BUCKET, 'starving.test', starving);
    const t = lane(a);
    const to = h.carryOn(t, BUCKET, at());
    expect(to?.q).toBe(starving);
    // The move: counts follow the lane, the emptied queue is handed back to be dropped.
    h.move(t, BUCKET, to as LaneTarget);
    expect([a.lanes, starving.lanes, t.key, dropped]).toEqual([0, 1, 'starving.test', ['a.test']]);
    expect(h.carryOn(t, BUCKET, at())?.q).toBe(more);
  });
});
