import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createSourcePicker } from '../../src/modules/ip-pools/source-picker.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';
import type { SinkMx } from '../peers/sink-mx.ts';

/**
 * IP pools and warmup end to end on loopback: the worker binds 127.0.0.2 / .3 / .4, and the sink
 * MX records the address each connection came from (smtp-server's session.remoteAddress).
 * Warmup days run on an injected clock, moved a day ahead by the test.
 */
let ctx: TestContext;
let destination: Destination;
let sink: SinkMx;
let worker: DeliveryWorker;
const signing = testSigningKey();
const clock = { ms: Date.now(), now: () => clock.ms };
/** Every RCPT the sink saw: who, from which address, and whether it was refused. */
const rcpts: { rcpt: string; from: string }[] = [];
const refusedOnce = new Set<string>();
/** Suspensions as pacing would report them, here for every site: address -> until (epoch ms). */
const suspensions = new Map<string, number>();

beforeAll(async () => {
  destination = await startDestination({
    signing,
    sink: {
      script: ({ stage, rcpt, remoteAddress }) => {
        if (stage !== 'rcpt') return 'accept';
        rcpts.push({ rcpt, from: remoteAddress });
        if (rcpt.startsWith('retry') && !refusedOnce.has(rcpt)) {
          refusedOnce.add(rcpt);
          return { code: 451, message: '4.7.1 Greylisted, come back later' };
        }
        return 'accept';
      },
    },
  });
  sink = destination.sink;
  ctx = await createTestContext({
    env: { ...destination.env, POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3,127.0.0.4,::1' },
  });
  worker = startTestWorker(ctx.c, 'pool-worker', {
    signing,
    sources: createSourcePicker(ctx.c, 'pool-worker', {
      clock,
      refreshMs: 0,
      suspensions: { suspendedUntil: (_site, address) => suspensions.get(address) ?? null },
    }),
  });
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await destination?.close();
});

async function api(t: TestTenant, method: 'POST' | 'PATCH', url: string, body: unknown) {
  const res = await call(ctx.app, method, url, { key: t.apiKey, body });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json();
}

async function send(t: TestTenant, recipients: string[], options: Record<string, unknown> = {}) {
  const res = await api(t, 'POST', '/v1/transmissions', {
    recipients: recipients.map((email) => ({ email })),
    content: { subject: 'Hi', text: 'Hello' },
    options,
  });
  return res.transmission_id as string;
}

async function rows(transmissionId: string) {
  return ctx.c.database.db
    .selectFrom('messages')
    .select(['id', 'recipient', 'state', 'source_address', 'attempt_count', 'next_attempt_at'])
    .where('transmission_id', '=', transmissionId)
    .execute();
}

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const delivered = (emails: string[]) => sink.messages.filter((m) => emails.includes(m.rcptTo[0] ?? ''));
const countBy = (list: { remoteAddress: string }[]) =>
  list.reduce<Record<string, number>>((acc, m) => {
    acc[m.remoteAddress] = (acc[m.remoteAddress] ?? 0) + 1;
    return acc;
  }, {});

/** Makes the transmission's waiting messages due now (as the next day's clock would). */
async function makeDue(transmissionId: string) {
  await ctx.c.database.db
    .updateTable('messages')
    .set({ next_attempt_at: new Date(Date.now() - 1000).toISOString() })
    .where('transmission_id', '=', transmissionId)
    .where('state', 'in', ['queued', 'deferred'])
    .execute();
}

describe('IP pools in delivery', () => {
  it("uses the pool's addresses by weight (3:1), and options.ip_pool picks another pool", async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    await api(t, 'POST', '/v1/ip-pools', {
      name: 'main',
      default: true,
      addresses: [
        { address: '127.0.0.2', weight: 3 },
        { address: '127.0.0.3', weight: 1 },
      ],
    });
    await api(t, 'POST', '/v1/ip-pools', { name: 'side', addresses: [{ address: '127.0.0.4' }] });
    const emails = Array.from({ length: 40 }, (_, i) => `w${i}@dest.test`);
    const id = await send(t, emails);
    await until('40 delivered', async () => (await rows(id)).every((r) => r.state === 'delivered'));
    expect(countBy(delivered(emails))).toEqual({ '127.0.0.2': 30, '127.0.0.3': 10 });
    // The stored address is the one the sink saw.
    for (const r of await rows(id)) {
      expect(r.state).toBe('delivered');
      expect(r.source_address).toBe(delivered([r.recipient])[0]?.remoteAddress);
    }
    const side = ['s1@dest.test', 's2@dest.test', 's3@dest.test'];
    await send(t, side, { ip_pool: 'side' });
    await until('side delivered', async () => delivered(side).length === 3);
    expect(countBy(delivered(side))).toEqual({ '127.0.0.4': 3 });
  });

  it('two addresses each get their own connections to a site: 120 messages split 60/60, none left waiting', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    await api(t, 'POST', '/v1/ip-pools', {
      name: 'even',
      default: true,
      addresses: [{ address: '127.0.0.2' }, { address: '127.0.0.3' }],
    });
    // 60 per address: enough for one address's queue to want every connection of the site.
    const emails = Array.from({ length: 120 }, (_, i) => `e${i}@dest.test`);
    const id = await send(t, emails);
    await until('120 delivered', async () => (await rows(id)).every((r) => r.state === 'delivered'), 30_000);
    expect(countBy(delivered(emails))).toEqual({ '127.0.0.2': 60, '127.0.0.3': 60 });
  }, 60_000);

  it('a message keeps its address across a retry (sink answers 4xx first)', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    await api(t, 'POST', '/v1/ip-pools', {
      name: 'pair',
      default: true,
      addresses: [{ address: '127.0.0.2' }, { address: '127.0.0.3' }],
    });
    const id = await send(t, ['retry1@dest.test']);
    const first = await until('deferred', async () => (await rows(id)).find((r) => r.state === 'deferred'));
    expect(first.attempt_count).toBe(1);
    const kept = first.source_address as string;
    expect(['127.0.0.2', '127.0.0.3']).toContain(kept);
    expect(rcpts.filter((r) => r.rcpt === 'retry1@dest.test').map((r) => r.from)).toEqual([kept]);
    // Equal weights alternate: a fresh message now takes the other address...
    const other = ['fresh1@dest.test'];
    await send(t, other);
    await until('fresh delivered', async () => delivered(other).length === 1);
    expect(delivered(other)[0]?.remoteAddress).not.toBe(kept);
    // ...while the retry goes out from its first address.
    await makeDue(id);
    await until('retry delivered', async () => delivered(['retry1@dest.test']).length === 1);
    expect(rcpts.filter((r) => r.rcpt === 'retry1@dest.test').map((r) => r.from)).toEqual([kept, kept]);
    const done = await until('retry recorded', async () => (await rows(id)).find((x) => x.state === 'delivered'));
    expect(done).toMatchObject({ state: 'delivered', attempt_count: 2, source_address: kept });
  });

  it('a retry moves off its address when that address is suspended for the site', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    await api(t, 'POST', '/v1/ip-pools', {
      name: 'pair',
      default: true,
      addresses: [{ address: '127.0.0.2' }, { address: '127.0.0.3' }],
    });
    const id = await send(t, ['retry2@dest.test']);
    const first = await until('deferred', async () => (await rows(id)).find((r) => r.state === 'deferred'));
    const was = first.source_address as string;
    suspensions.set(was, Date.now() + 3_600_000);
    try {
      await makeDue(id);
      const done = await until('delivered', async () => (await rows(id)).find((r) => r.state === 'delivered'));
      const now = done.source_address as string;
      expect(now).not.toBe(was);
      expect(rcpts.filter((r) => r.rcpt === 'retry2@dest.test').map((r) => r.from)).toEqual([was, now]);
    } finally {
      suspensions.clear();
    }
  });

  it('a pool with IPv6 and IPv4 addresses sends to an IPv4-only MX from its IPv4 address', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    await api(t, 'POST', '/v1/ip-pools', {
      name: 'mixed',
      default: true,
      addresses: [{ address: '::1' }, { address: '127.0.0.3' }],
    });
    const emails = ['m1@dest.test', 'm2@dest.test', 'm3@dest.test', 'm4@dest.test'];
    const id = await send(t, emails);
    await until('delivered', async () => (await rows(id)).every((r) => r.state === 'delivered'));
    expect(countBy(delivered(emails))).toEqual({ '127.0.0.3': 4 });
    expect((await rows(id)).every((r) => r.source_address === '127.0.0.3' && r.attempt_count === 1)).toBe(true);
  });

  it('an IPv6 source address is not tried toward an IPv4-only MX: deferred, saying why', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    await api(t, 'POST', '/v1/ip-pools', { name: 'v6', default: true, addresses: [{ address: '::1' }] });
    const id = await send(t, ['v6only@dest.test']);
    const row = await until('deferred', async () =>
      ctx.c.database.db
        .selectFrom('messages')
        .select(['state', 'last_response', 'source_address'])
        .where('transmission_id', '=', id)
        .where('state', '=', 'deferred')
        .executeTakeFirst(),
    );
    expect(row.source_address).toBe('::1');
    expect(row.last_response).toBe('no address of mx1.dest.test is of the family of the source address ::1');
    expect(rcpts.filter((r) => r.rcpt === 'v6only@dest.test')).toEqual([]);
  });

  it('an address at its warmup cap overflows into the overflow pool; nothing waits or is lost', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    const policy = await api(t, 'POST', '/v1/warmup-policies', {
      stages: [{ day: 1, daily_limit: 2 }],
      max_bounce_rate: 0.1,
      max_complaint_rate: 0.01,
    });
    const spill = await api(t, 'POST', '/v1/ip-pools', { name: 'spill', addresses: [{ address: '127.0.0.3' }] });
    // A warmup policy goes on an address dedicated to the tenant (docs/ip-pools.md); shared again after.
    await ctx.c.sourceAddresses.dedicate('127.0.0.2', t.tenantId);
    onTestFinished(() => ctx.c.sourceAddresses.share('127.0.0.2').then(() => {}));
    await api(t, 'POST', '/v1/ip-pools', {
      name: 'warm',
      default: true,
      overflow_pool_id: spill.id,
      addresses: [{ address: '127.0.0.2', warmup_policy_id: policy.id }],
    });
    const emails = Array.from({ length: 5 }, (_, i) => `o${i}@dest.test`);
    const id = await send(t, emails);
    await until('5 delivered', async () => (await rows(id)).every((r) => r.state === 'delivered'));
    expect(countBy(delivered(emails))).toEqual({ '127.0.0.2': 2, '127.0.0.3': 3 });
    expect((await rows(id)).every((r) => r.state === 'delivered' && r.attempt_count === 1)).toBe(true);
  });

  it("the operator's warmup schedule of a shared address caps every tenant's mail there, together", async () => {
    await ctx.c.sourceAddresses.setWarmup('127.0.0.3', {
      stages: [{ day: 1, daily_limit: 3 }],
      max_bounce_rate: 0.1,
      max_complaint_rate: 0.01,
    });
    onTestFinished(() => ctx.c.sourceAddresses.setWarmup('127.0.0.3', null).then(() => {}));
    const ids: string[] = [];
    const emails: string[] = [];
    for (const n of [1, 2]) {
      const t = await createTenant(ctx, 'Shop <news@shop.test>');
      await api(t, 'POST', '/v1/ip-pools', { name: 'three', default: true, addresses: [{ address: '127.0.0.3' }] });
      const mine = [`op${n}a@dest.test`, `op${n}b@dest.test`];
      emails.push(...mine);
      ids.push(await send(t, mine));
    }
    await until('3 delivered, 1 waiting', async () => {
      const r = (await Promise.all(ids.map(rows))).flat();
      return (
        r.filter((x) => x.state === 'delivered').length === 3 &&
        r.filter((x) => x.state === 'queued' && x.attempt_count === 0).length === 1
      );
    });
    expect(countBy(delivered(emails))).toEqual({ '127.0.0.3': 3 });
    const counter = await ctx.c.database.db
      .selectFrom('warmup_counters')
      .select('sent')
      .where('address', '=', '127.0.0.3')
      .where('period', 'like', 'd:%')
      .execute();
    expect(counter.map((c) => Number(c.sent))).toEqual([3]);
  });

  it('warmup caps hold across a simulated day; the next stage opens after a clean day; nothing is lost', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    const policy = await api(t, 'POST', '/v1/warmup-policies', {
      stages: [
        { day: 1, daily_limit: 3 },
        { day: 2, daily_limit: 5 },
      ],
      max_bounce_rate: 0.2,
      max_complaint_rate: 0.01,
    });
    await ctx.c.sourceAddresses.dedicate('127.0.0.4', t.tenantId);
    onTestFinished(() => ctx.c.sourceAddresses.share('127.0.0.4').then(() => {}));
    const pool = await api(t, 'POST', '/v1/ip-pools', {
      name: 'new-ip',
      addresses: [{ address: '127.0.0.4', warmup_policy_id: policy.id }],
    });
    const emails = Array.from({ length: 10 }, (_, i) => `d${i}@dest.test`);
    const id = await send(t, emails, { ip_pool: pool.id });
    const dayMs = 86_400_000;
    const nextMidnight = Math.floor(clock.ms / dayMs) * dayMs + dayMs;

    // Day 1: three go out; seven wait (queued, no attempt counted) until the next UTC day.
    await until('day 1 settled', async () => {
      const r = await rows(id);
      return (
        r.filter((x) => x.state === 'delivered').length === 3 && r.filter((x) => x.state === 'queued').length === 7
      );
    });
    let r = await rows(id);
    for (const w of r.filter((x) => x.state === 'queued')) {
      expect(w.attempt_count).toBe(0);
      expect(Date.parse(w.next_attempt_at)).toBeGreaterThanOrEqual(nextMidnight);
    }
    expect(delivered(emails)).toHaveLength(3);
    // Made due early on the same day: the cap still holds (they are put back again, not sent).
    await makeDue(id);
    await until(
      'put back',
      async () =>
        (await rows(id)).filter((x) => x.state === 'queued' && Date.parse(x.next_attempt_at) > Date.now()).length === 7,
    );
    expect(delivered(emails)).toHaveLength(3);

    // Day 2 (a clean day 1): the stage's limit is 5.
    clock.ms += dayMs;
    await makeDue(id);
    await until('day 2 settled', async () => (await rows(id)).filter((x) => x.state === 'delivered').length === 8);
    await new Promise((res) => setTimeout(res, 500));
    expect(delivered(emails)).toHaveLength(8);

    // Day 3: past the last stage (warmed up): the rest go.
    clock.ms += dayMs;
    await makeDue(id);
    await until('all delivered', async () => (await rows(id)).every((x) => x.state === 'delivered'));
    expect(delivered(emails)).toHaveLength(10);
    expect(countBy(delivered(emails))).toEqual({ '127.0.0.4': 10 });
    r = await rows(id);
    expect(r.every((x) => x.attempt_count === 1)).toBe(true);
    const progress = await ctx.c.database.db
      .selectFrom('warmup_progress')
      .selectAll()
      .where('address', '=', '127.0.0.4')
      .executeTakeFirstOrThrow();
    expect(progress.warmup_day).toBe(3);
  });
});
