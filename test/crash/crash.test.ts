/**
 * Crash safety (issue 9, item 2): four HTTP clients post transmissions (25 recipients each, two
 * tenants, one webhook each: batch and single policy) until 10,000 messages are acknowledged, while
 * the node(s) deliver them to a sink MX and dispatch the events. One node is killed with SIGKILL
 * while requests to it are in flight and it holds delivery leases and claimed webhook units, then
 * started again on the same database (short leases: 20 s delivery, 15 s webhooks). Afterwards:
 * - every 202 a client saw has exactly its recipients stored, and every one of them reached the sink;
 * - a request that got no answer was stored entirely or not at all;
 * - duplicates at the sink are at most the delivery leases the dead node held (counted, printed);
 * - every event reached each webhook endpoint at least once; duplicates at most the events in the
 *   webhook units the dead node had claimed (counted, printed).
 * SQLite: one node (api,worker), killed and restarted on the same data dir. PostgreSQL: two
 * nodes, one killed and restarted while the other keeps working.
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
  kill9,
  messageIdsAtSink,
  type Node,
  request,
  sleep,
  startNode,
  until,
} from '../helpers/cluster.ts';
import { killChildren } from '../helpers/server-process.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { type Receiver, startReceiver } from '../webhooks/helpers.ts';

const TARGET = 10_000; // messages acknowledged with 202
const PER_REQUEST = 25;
const CLIENTS = 4;
const PACE_MS = 30; // pause between one client's requests, so accepting lasts while delivery runs
const BACKLOG = 4000; // clients wait while more acknowledged messages than this are not at the sink
const NODES = DIALECT === 'postgres' ? 2 : 1;

interface Ack {
  transmissionId: string;
  recipients: string[];
}

describe(`kill -9 while accepting, delivering and dispatching (${DIALECT}, ${NODES} node${NODES > 1 ? 's' : ''})`, () => {
  let ctx: TestContext;
  let sink: SinkMx;
  let dns: DnsServer;
  let receiver: Receiver;
  let t: TestTenant; // 9 requests in 10; its webhook has the batch policy
  let s: TestTenant; // 1 request in 10; its webhook has the single policy (one POST per event)
  const nodes: Node[] = [];
  const retired: Node[] = [];
  let env: Record<string, string>;
  const hooks = { single: '', batch: '' };

  beforeAll(async () => {
    sink = await startSinkMx({ tls: false });
    dns = await startDnsServer({
      'crash.test': { MX: [{ preference: 10, exchange: 'mx.crash.test' }] },
      'mx.crash.test': { A: ['127.0.0.1'] },
    });
    // A few milliseconds per answer keeps POSTs in flight, so the kill lands mid-dispatch.
    receiver = await startReceiver(() => ({ status: 200, delayMs: 5 }));
    ctx = await createTestContext();
    t = await createTenant(ctx, 'Crash <c@crash-sender.test>');
    s = await createTenant(ctx, 'Single <s@crash-sender.test>');
    for (const [name, owner, body] of [
      ['single', s, { events: ['*'], dispatch_policy: 'single' }],
      ['batch', t, { events: ['*'], dispatch_policy: 'batch', batch_max_size: 100, batch_max_wait_ms: 200 }],
    ] as const) {
      const res = await call(ctx.app, 'POST', '/v1/webhooks', {
        key: owner.apiKey,
        body: { url: `${receiver.url}/${name}`, ...body },
      });
      expect(res.statusCode, res.body).toBe(201);
      hooks[name] = res.json().id as string;
    }
    env = {
      POSTYARD_DNS_SERVERS: dns.address,
      POSTYARD_MX_PORT: String(sink.port),
      // Short leases, so the dead node's claims come back within the test.
      POSTYARD_DELIVERY_LEASE_SECONDS: '20',
      POSTYARD_WEBHOOK_LEASE_SECONDS: '15',
    };
    for (let i = 1; i <= NODES; i++) nodes.push(await startNode(ctx, `n${i}`, 'api,worker', env));
  }, 300_000); // NODES node processes start one after the other (SPAWN_TIMEOUT_MS each at most)

  afterAll(async () => {
    for (const n of [...retired, ...nodes]) {
      const errors = errorLines(n);
      if (errors.length)
        console.log(`[crash] ${n.name} logged ${errors.length} errors:\n${errors.slice(0, 5).join('\n')}`);
    }
    await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
    killChildren();
    await receiver?.close();
    await sink?.close();
    await dns?.close();
    await ctx?.close();
  });

  const db = () => ctx.c.database.db;

  async function count(table: 'messages' | 'events', where: Record<string, string> = {}): Promise<number> {
    let q = db()
      .selectFrom(table)
      .select((eb) => eb.fn.countAll().as('n'));
    for (const [k, v] of Object.entries(where)) q = q.where(k as 'id', '=', v);
    return Number((await q.executeTakeFirstOrThrow()).n);
  }

  /** What the node holds at this moment: message leases and claimed webhook units. */
  async function heldBy(node: Node) {
    const leased = await db()
      .selectFrom('messages')
      .select('id')
      .where('state', '=', 'sending')
      .where('locked_by', 'like', node.holderPattern)
      .execute();
    const units = await db()
      .selectFrom('webhook_queue')
      .select(['webhook_id', 'event_ids'])
      .where('locked_by', 'like', node.holderPattern)
      .execute();
    const unitEvents = (id: string) =>
      units.filter((u) => u.webhook_id === id).reduce((n, u) => n + (JSON.parse(u.event_ids) as string[]).length, 0);
    return {
      leases: new Set(leased.map((r) => r.id)),
      units: units.length,
      singleEvents: unitEvents(hooks.single),
      batchEvents: unitEvents(hooks.batch),
    };
  }

  it('loses no accepted message and no event; duplicates stay within what the dead node held', async () => {
    const acked: Ack[] = [];
    const unanswered: { recipients: string[]; error: string }[] = [];
    const refused: { status: number; body: unknown }[] = [];
    let ackedMessages = 0;
    const posting = new Map<string, number>(); // per node URL: requests waiting for their answer
    const postingTo = (n: Node) => posting.get(n.baseUrl) ?? 0;
    let seq = 0;
    const started = Date.now();

    const client = async (c: number) => {
      while (ackedMessages < TARGET) {
        // Back-pressure: keep the undelivered backlog bounded, so that on a machine of any speed
        // accepting and delivering overlap (and the kill below finds both under way).
        if (ackedMessages - sink.messages.length > BACKLOG) {
          await sleep(50);
          continue;
        }
        const req = seq++;
        const recipients = Array.from({ length: PER_REQUEST }, (_, k) => `r${req}-${k}@crash.test`);
        const node = nodes[(req + c) % nodes.length] as Node;
        posting.set(node.baseUrl, postingTo(node) + 1);
        const r = await request(node.baseUrl, 'POST', '/v1/transmissions', (req % 10 === 0 ? s : t).apiKey, {
          recipients: recipients.map((email) => ({ email })),
          content: { subject: `crash ${req}`, text: 'at least once, at most the leases twice' },
        });
        posting.set(node.baseUrl, postingTo(node) - 1);
        if (r.status === 202) {
          acked.push({ transmissionId: String(r.body?.transmission_id), recipients });
          ackedMessages += recipients.length;
        } else if (r.status === null) unanswered.push({ recipients, error: String(r.error) });
        else refused.push({ status: r.status, body: r.body });
        await sleep(r.status === 202 ? PACE_MS : 100);
      }
    };
    const clients = Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));

    // Kill once the victim is busy on all three fronts (requests in flight, delivery leases,
    // webhook units), or at the latest at 80 % accepted.
    const victim = nodes[0] as Node;
    let ready = false;
    await until(
      async () => {
        if (ackedMessages >= TARGET * 0.8) return true;
        if (ackedMessages < TARGET * 0.2 || sink.messages.length < TARGET * 0.03) return false;
        const h = await heldBy(victim);
        ready = h.leases.size > 0 && h.units > 0 && postingTo(victim) > 0;
        return ready;
      },
      120_000,
      () => `acked ${ackedMessages}, sink ${sink.messages.length}`,
      50,
    );
    const sinkBeforeKill = sink.messages.length;
    const postingAtKill = postingTo(victim);
    await kill9(victim);
    const killedAt = Date.now() - started;
    await sleep(500); // let the database notice the closed connections
    const held = await heldBy(victim);
    const atKill = {
      acked: ackedMessages,
      sink: sinkBeforeKill,
      delivered: await count('messages', { state: 'delivered' }),
    };
    retired.push(victim);
    nodes[0] = await startNode(ctx, `${victim.name}-restarted`, victim.roles, env);
    const restartedAt = Date.now() - started;

    await clients;
    const acceptedAt = Date.now() - started;
    const ackedRecipients = new Set(acked.flatMap((a) => a.recipients));
    const stored = async () => count('messages');
    await until(
      async () => {
        const total = await stored();
        return (
          (await count('messages', { state: 'delivered' })) === total && sink.messages.length >= ackedRecipients.size
        );
      },
      150_000,
      async () =>
        `delivered ${await count('messages', { state: 'delivered' })} of ${await stored()}, sink ${sink.messages.length}; ` +
        JSON.stringify(
          await db()
            .selectFrom('messages')
            .select([
              'state',
              'locked_by',
              (eb) => eb.fn.countAll().as('n'),
              (eb) => eb.fn.min('next_attempt_at').as('next'),
            ])
            .groupBy(['state', 'locked_by'])
            .execute(),
        ) +
        ` nodes ${nodes.map((n) => `${n.name}=${n.child.pid}`).join(',')} now ${new Date().toISOString()}`,
      250,
    );
    const deliveredAt = Date.now() - started;

    const events = await db().selectFrom('events').select(['id', 'tenant_id']).execute();
    const expected = {
      single: events.filter((e) => e.tenant_id === s.tenantId).map((e) => e.id),
      batch: events.filter((e) => e.tenant_id === t.tenantId).map((e) => e.id),
    };
    const received = (name: string) =>
      eventCounts(receiver.received.filter((r) => r.path === `/hook/${name}`).map((r) => r.body));
    await until(
      () =>
        (['single', 'batch'] as const).every((k) => {
          const got = received(k);
          return expected[k].every((id) => got.has(id));
        }),
      150_000,
      async () =>
        `single ${received('single').size}/${expected.single.length}, batch ${received('batch').size}/${expected.batch.length}; ` +
        `queue ${JSON.stringify(await db().selectFrom('webhook_queue').select(['webhook_id', 'event_count', 'attempts', 'next_attempt_at', 'locked_until', 'locked_by']).limit(20).execute())}; ` +
        `outbox ${JSON.stringify(await db().selectFrom('webhook_outbox').selectAll().limit(5).execute())}; ` +
        `failed ${JSON.stringify(await db().selectFrom('webhook_deliveries').selectAll().where('status_code', 'is', null).limit(5).execute())}`,
      500,
    );
    const dispatchedAt = Date.now() - started;
    await sleep(1000); // stragglers

    // --- accepting: every 202 has exactly its recipients; unanswered requests are all or nothing
    const rows = await db().selectFrom('messages').select(['id', 'transmission_id', 'recipient']).execute();
    const byTransmission = new Map<string, string[]>();
    for (const r of rows) {
      const list = byTransmission.get(r.transmission_id);
      if (list) list.push(r.recipient);
      else byTransmission.set(r.transmission_id, [r.recipient]);
    }
    const wrongTransmissions = acked.filter(
      (a) =>
        JSON.stringify((byTransmission.get(a.transmissionId) ?? []).sort()) !==
        JSON.stringify([...a.recipients].sort()),
    );
    const storedRecipients = new Set(rows.map((r) => r.recipient));
    const errorKinds = new Map<string, number>();
    const partlyStored: string[] = [];
    let unansweredStored = 0;
    for (const u of unanswered) {
      errorKinds.set(u.error, (errorKinds.get(u.error) ?? 0) + 1);
      const n = u.recipients.filter((r) => storedRecipients.has(r)).length;
      if (n === u.recipients.length) unansweredStored++;
      else if (n > 0) partlyStored.push(`${u.recipients[0]}: ${n} of ${u.recipients.length}`);
    }

    // --- delivery: everything stored reached the sink; extra copies at most the dead node's leases
    const atSink = messageIdsAtSink(sink);
    const ids = new Set(rows.map((r) => r.id));
    const notDelivered = [...ids].filter((id) => !atSink.has(id));
    const unknownAtSink = [...atSink.keys()].filter((id) => !ids.has(id));
    const sinkRecipients = new Set(sink.messages.flatMap((m) => m.rcptTo));
    const ackedMissing = [...ackedRecipients].filter((r) => !sinkRecipients.has(r));
    const dupIds = [...atSink].filter(([, n]) => n > 1).map(([id]) => id);
    const outside = dupIds.filter((id) => !held.leases.has(id));
    const mailDuplicates = extraCopies(atSink);
    const deliveredEvents = await count('events', { type: 'message.delivered' });

    // --- webhooks: at least once; extra copies at most the events of the dead node's units
    const single = received('single');
    const batch = received('batch');
    const whDuplicates = { single: extraCopies(single), batch: extraCopies(batch) };

    console.log(
      [
        `[crash] ${DIALECT}, ${NODES} node(s): ${acked.length} transmissions acknowledged (${ackedRecipients.size} messages), ` +
          `${unanswered.length} requests without answer ${JSON.stringify(Object.fromEntries(errorKinds))}: ` +
          `${unansweredStored} of them stored entirely, the rest not at all`,
        `[crash] kill -9 at ${killedAt} ms: ${postingAtKill} requests in flight to it, ${atKill.acked} messages acknowledged, ` +
          `${atKill.sink} at the sink, ${atKill.delivered} recorded delivered; the dead node held ${held.leases.size} ` +
          `delivery leases and ${held.units} webhook units (${held.singleEvents} single + ${held.batchEvents} batched events)`,
        `[crash] restarted at ${restartedAt} ms; accepting done at ${acceptedAt} ms, all ${ids.size} delivered at ` +
          `${deliveredAt} ms, all ${events.length} events dispatched at ${dispatchedAt} ms`,
        `[crash] sink: ${sink.messages.length} messages, ${mailDuplicates} duplicates ` +
          `(${outside.length} outside the dead node's leases; bound ${held.leases.size})`,
        `[crash] webhooks: single ${single.size} events, ${whDuplicates.single} duplicates (bound ${held.singleEvents}); ` +
          `batch ${batch.size} events, ${whDuplicates.batch} duplicates (bound ${held.batchEvents})`,
      ].join('\n'),
    );
    expect(ready, 'the kill should land while the node took requests, held delivery leases and webhook units').toBe(
      true,
    );
    expect(atKill.acked).toBeLessThan(TARGET);
    expect(ackedRecipients.size).toBeGreaterThanOrEqual(TARGET);
    expect(wrongTransmissions.map((a) => a.transmissionId)).toEqual([]);
    expect(partlyStored).toEqual([]);
    expect(refused).toEqual([]);
    expect(notDelivered).toEqual([]);
    expect(ackedMissing).toEqual([]);
    expect(unknownAtSink).toEqual([]);
    expect(deliveredEvents).toBe(ids.size); // one recorded outcome per message, however often sent
    expect(mailDuplicates).toBeLessThanOrEqual(held.leases.size);
    expect(whDuplicates.single).toBeLessThanOrEqual(held.singleEvents);
    expect(whDuplicates.batch).toBeLessThanOrEqual(held.batchEvents);
  }, 300_000);
});
