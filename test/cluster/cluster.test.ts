/**
 * Several real Postyard processes on one PostgreSQL database (issue 9, item 1):
 *   n1 --roles api          n2 --roles api,worker          n3 --roles api,worker
 * shows that 20,000 messages accepted through the API nodes reach the sink MX exactly once, that
 * every webhook endpoint gets every event exactly once, that the rate limit of one API key holds
 * across two API nodes, and that the periodic idempotency purge runs on one node at a time (the
 * lease row is sampled while the nodes run, then its holder is killed and another takes over).
 *
 * PostgreSQL only: on SQLite, Postyard is one process by design (docs/operations.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import {
  errorLines,
  eventCounts,
  extraCopies,
  inPool,
  kill9,
  messageIdsAtSink,
  type Node,
  request,
  sleep,
  startNode,
  until,
} from '../helpers/cluster.ts';
import { killChildren, SPAWN_TIMEOUT_MS } from '../helpers/server-process.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { type Receiver, startReceiver } from '../webhooks/helpers.ts';

const PER_TRANSMISSION = 500;
const A_TRANSMISSIONS = 36; // tenant A: 18,000 messages
const B_TRANSMISSIONS = 4; // tenant B: 2,000 messages
const TOTAL = (A_TRANSMISSIONS + B_TRANSMISSIONS) * PER_TRANSMISSION;
const RATE = { rps: 1, burst: 20 };
const PURGE_SECONDS = 1; // the purge lease lasts twice this

const reason = 'several nodes share one PostgreSQL database; on SQLite Postyard is a single node by design';
if (DIALECT !== 'postgres') console.info(`test/cluster skipped: ${reason} (set TEST_DATABASE_URL to run it)`);

const title = DIALECT === 'postgres' ? 'several nodes on one PostgreSQL' : `several nodes (skipped: ${reason})`;

describe.skipIf(DIALECT !== 'postgres')(title, () => {
  let ctx: TestContext;
  let sink: SinkMx;
  let dns: DnsServer;
  let receiver: Receiver;
  let a: TestTenant;
  let b: TestTenant;
  let c: TestTenant;
  let nodes: Node[] = [];
  const leaseSeen: { holder: string; until: string; at: number }[] = [];
  let sampling = true;
  let sampler: Promise<void> = Promise.resolve();

  const db = () => ctx.c.database.db;
  const nodeOfHolder = (holder: string) => nodes.find((n) => holder.includes(`:${n.child.pid}:`))?.name ?? holder;

  async function sampleLeases() {
    while (sampling) {
      const row = await db()
        .selectFrom('leases')
        .select(['holder', 'locked_until'])
        .where('name', '=', 'idempotency-purge')
        .executeTakeFirst()
        .catch(() => undefined);
      const last = leaseSeen[leaseSeen.length - 1];
      if (row && (last?.holder !== row.holder || last.until !== row.locked_until))
        leaseSeen.push({ holder: row.holder, until: row.locked_until, at: Date.now() });
      await sleep(100);
    }
  }

  beforeAll(async () => {
    sink = await startSinkMx({ tls: false });
    dns = await startDnsServer({
      'cluster.test': { MX: [{ preference: 10, exchange: 'mx.cluster.test' }] },
      'mx.cluster.test': { A: ['127.0.0.1'] },
    });
    receiver = await startReceiver();
    ctx = await createTestContext();
    a = await createTenant(ctx, 'A <a@a-sender.test>');
    b = await createTenant(ctx, 'B <b@b-sender.test>');
    c = await createTenant(ctx, 'C <c@c-sender.test>');
    // The node-wide budget (RATE) is what the rate-limit test checks with tenant C; the two bulk
    // tenants get a per-tenant allowance large enough for the load test.
    await db()
      .updateTable('tenants')
      .set({ rate_limit_rps: 100_000, rate_limit_burst: 100_000 })
      .where('id', 'in', [a.tenantId, b.tenantId])
      .execute();
    const hooks = [
      [a, 'w1', { events: ['*'], dispatch_policy: 'batch', batch_max_size: 100, batch_max_wait_ms: 200 }],
      [
        a,
        'w3',
        { events: ['message.delivered'], dispatch_policy: 'batch', batch_max_size: 100, batch_max_wait_ms: 200 },
      ],
      [b, 'w2', { events: ['*'], dispatch_policy: 'single' }],
    ] as const;
    for (const [t, path, body] of hooks) {
      const res = await call(ctx.app, 'POST', '/v1/webhooks', {
        key: t.apiKey,
        body: { url: `${receiver.url}/${path}`, ...body },
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    const env = {
      POSTYARD_DNS_SERVERS: dns.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_RATE_LIMIT_RPS: String(RATE.rps),
      POSTYARD_RATE_LIMIT_BURST: String(RATE.burst),
      POSTYARD_IDEMPOTENCY_PURGE_SECONDS: String(PURGE_SECONDS),
    };
    nodes = await Promise.all([
      startNode(ctx, 'n1', 'api', env),
      startNode(ctx, 'n2', 'api,worker', env),
      startNode(ctx, 'n3', 'api,worker', env),
    ]);
    sampler = sampleLeases();
  }, 2 * SPAWN_TIMEOUT_MS); // three node processes start at once

  afterAll(async () => {
    sampling = false;
    await sampler;
    for (const n of nodes) {
      const errors = errorLines(n);
      if (errors.length)
        console.log(`[cluster] ${n.name} logged ${errors.length} errors:\n${errors.slice(0, 5).join('\n')}`);
    }
    await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
    killChildren();
    await receiver?.close();
    await sink?.close();
    await dns?.close();
    await ctx?.close();
  });

  async function deliveredCount(): Promise<number> {
    const row = await db()
      .selectFrom('messages')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('state', '=', 'delivered')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  it('delivers 20,000 messages accepted on three API nodes exactly once, by both workers', async () => {
    const started = Date.now();
    const batches = Array.from({ length: A_TRANSMISSIONS + B_TRANSMISSIONS }, (_, i) => i);
    const api = nodes; // every node has the api role; n1 has nothing else
    const results = await inPool(batches, 4, async (i) => {
      const t = i < A_TRANSMISSIONS ? a : b;
      const recipients = Array.from({ length: PER_TRANSMISSION }, (_, k) => ({
        email: `u${i * PER_TRANSMISSION + k}@cluster.test`,
      }));
      const node = api[i % api.length] as Node;
      return request(node.baseUrl, 'POST', '/v1/transmissions', t.apiKey, {
        recipients,
        content: { subject: `cluster ${i}`, text: 'exactly once' },
      });
    });
    for (const r of results) {
      expect(r.status, JSON.stringify(r)).toBe(202);
      expect(r.body?.total_accepted_recipients).toBe(PER_TRANSMISSION);
    }
    const acceptedMs = Date.now() - started;

    // While the queue drains, note how many messages each worker holds under lease.
    const leasedBy = new Map<string, number>();
    await until(
      async () => {
        const rows = await db()
          .selectFrom('messages')
          .select(['locked_by', (eb) => eb.fn.countAll().as('n')])
          .where('state', '=', 'sending')
          .groupBy('locked_by')
          .execute();
        for (const r of rows) {
          const name = nodeOfHolder(String(r.locked_by));
          leasedBy.set(name, Math.max(leasedBy.get(name) ?? 0, Number(r.n)));
        }
        return (await deliveredCount()) >= TOTAL && sink.messages.length >= TOTAL;
      },
      180_000,
      async () => `delivered ${await deliveredCount()} of ${TOTAL}, sink has ${sink.messages.length}`,
      500,
    );
    const deliveredMs = Date.now() - started;
    // Nothing may arrive late: give stragglers a moment, then count.
    await sleep(1500);
    const atSink = messageIdsAtSink(sink);
    const ids = (await db().selectFrom('messages').select('id').execute()).map((r) => r.id);
    const perNode = new Map<string, number>();
    for (const m of sink.messages) perNode.set(m.heloName, (perNode.get(m.heloName) ?? 0) + 1);
    console.log(
      `[cluster] ${TOTAL} messages: accepted in ${acceptedMs} ms, all delivered after ${deliveredMs} ms; ` +
        `sink received ${sink.messages.length} (${atSink.size} distinct, ${extraCopies(atSink)} duplicates); ` +
        `per node ${JSON.stringify(Object.fromEntries(perNode))}; most leases held at once ${JSON.stringify(Object.fromEntries(leasedBy))}`,
    );
    expect(ids.length).toBe(TOTAL);
    expect(extraCopies(atSink)).toBe(0);
    expect(sink.messages.length).toBe(TOTAL);
    expect([...atSink.keys()].sort()).toEqual([...ids].sort());
    // Both worker nodes took part; the API-only node delivered nothing.
    expect(perNode.get('n2.nodes.test') ?? 0).toBeGreaterThan(0);
    expect(perNode.get('n3.nodes.test') ?? 0).toBeGreaterThan(0);
    expect(perNode.get('n1.nodes.test')).toBeUndefined();
    // One outcome per message: one attempt and one message.delivered event each.
    const attempts = await db()
      .selectFrom('delivery_attempts')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(attempts.n)).toBe(TOTAL);
  }, 240_000);

  it('fires every webhook once per event per endpoint', async () => {
    const events = await db().selectFrom('events').select(['id', 'tenant_id', 'type']).execute();
    const expected = {
      w1: events.filter((e) => e.tenant_id === a.tenantId).map((e) => e.id),
      w3: events.filter((e) => e.tenant_id === a.tenantId && e.type === 'message.delivered').map((e) => e.id),
      w2: events.filter((e) => e.tenant_id === b.tenantId).map((e) => e.id),
    };
    expect(expected.w1.length).toBe(2 * A_TRANSMISSIONS * PER_TRANSMISSION); // accepted + delivered
    expect(expected.w3.length).toBe(A_TRANSMISSIONS * PER_TRANSMISSION);
    expect(expected.w2.length).toBe(2 * B_TRANSMISSIONS * PER_TRANSMISSION);
    const countsOf = (path: string) =>
      eventCounts(receiver.received.filter((r) => r.path === `/hook/${path}`).map((r) => r.body));
    const keys = ['w1', 'w2', 'w3'] as const;
    await until(
      () => keys.every((k) => countsOf(k).size >= expected[k].length),
      120_000,
      () => keys.map((k) => `${k}: ${countsOf(k).size}/${expected[k].length}`).join(', '),
      250,
    );
    await sleep(1500); // a second copy, if any, would be on its way by now
    const summary: string[] = [];
    for (const k of keys) {
      const got = countsOf(k);
      summary.push(`${k} ${got.size} events, ${extraCopies(got)} duplicates`);
      expect(extraCopies(got), k).toBe(0);
      expect([...got.keys()].sort(), k).toEqual([...expected[k]].sort());
    }
    const posts = receiver.received.length;
    console.log(`[cluster] webhooks: ${summary.join('; ')} (${posts} POSTs in all)`);
  }, 180_000);

  it('holds the rate limit of one API key across two API nodes', async () => {
    const n = 200;
    const started = Date.now();
    const results = await inPool(
      Array.from({ length: n }, (_, i) => i),
      10,
      (i) => request((nodes[i % 2] as Node).baseUrl, 'GET', '/v1/api-keys?limit=1', c.apiKey),
    );
    const elapsedS = (Date.now() - started) / 1000;
    const ok = results.filter((r) => r.status === 200).length;
    const limited = results.filter((r) => r.status === 429).length;
    // The bucket starts full (burst) and refills at rps while the requests run: no more than that
    // may pass, whichever node answers (the nodes' takes span less than elapsedS).
    const budget = RATE.burst + Math.floor(elapsedS * RATE.rps);
    console.log(
      `[cluster] rate limit ${RATE.rps}/s burst ${RATE.burst}: ${n} requests over n1 and n2 in ${elapsedS.toFixed(2)} s: ` +
        `${ok} accepted (budget ${budget}), ${limited} answered 429`,
    );
    expect(ok + limited).toBe(n);
    expect(ok).toBeGreaterThanOrEqual(RATE.burst);
    expect(ok).toBeLessThanOrEqual(budget);
  }, 60_000);

  it('runs the periodic purge on one node at a time, and another takes over when its holder dies', async () => {
    await until(
      () => leaseSeen.length >= 3,
      30_000,
      () => `lease observations: ${JSON.stringify(leaseSeen)}`,
    );
    const holder = leaseSeen[leaseSeen.length - 1]?.holder as string;
    const victim = nodes.find((n) => holder.includes(`:${n.child.pid}:`));
    expect(victim && ['n2', 'n3'].includes(victim.name), `holder ${holder}`).toBe(true);
    const killedAt = Date.now();
    await kill9(victim as Node);
    await until(
      () => leaseSeen.some((s) => s.at > killedAt && s.holder !== holder),
      60_000,
      () => `no takeover after the holder died: ${JSON.stringify(leaseSeen.slice(-3))}`,
    );
    sampling = false;
    await sampler;

    const ttlMs = 2 * PURGE_SECONDS * 1000;
    const runs = new Map<string, number>();
    let handovers = 0;
    for (let i = 0; i < leaseSeen.length; i++) {
      const s = leaseSeen[i] as (typeof leaseSeen)[number];
      const name = nodeOfHolder(s.holder);
      expect(['n2', 'n3'], `only worker nodes run the scheduler: ${s.holder}`).toContain(name);
      runs.set(name, (runs.get(name) ?? 0) + 1);
      const prev = leaseSeen[i - 1];
      if (prev && prev.holder !== s.holder) {
        handovers++;
        // The new holder took the lease only after the previous one had expired.
        expect(Date.parse(s.until) - ttlMs, `handover ${i}`).toBeGreaterThan(Date.parse(prev.until));
      }
    }
    const survivor = nodeOfHolder(leaseSeen[leaseSeen.length - 1]?.holder as string);
    console.log(
      `[cluster] idempotency purge every ${PURGE_SECONDS} s on n2 and n3: ${leaseSeen.length} lease acquisitions seen ` +
        `(${JSON.stringify(Object.fromEntries(runs))}), ${handovers} handover(s); ${victim?.name} killed, ${survivor} took over`,
    );
    expect(survivor).not.toBe(victim?.name);
    expect(handovers).toBeGreaterThanOrEqual(1);
  }, 120_000);

  it('logged no error on any node (a deadlock between nodes, for one, would show here)', () => {
    expect(nodes.flatMap((n) => errorLines(n).map((l) => `${n.name}: ${l}`))).toEqual([]);
  });
});
