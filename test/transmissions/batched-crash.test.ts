/**
 * kill -9 in the middle of batched accepts (issue 19): 24 clients post single transmissions, each
 * with its own Idempotency-Key, to a node whose group commit gathers them into shared
 * transactions; the node is killed with SIGKILL while batches are in flight, a new node is
 * started on the same database, and every request that got no 202 is sent again with its key.
 * Afterwards every key has exactly one transmission, with its two messages, two events and two
 * outbox rows: nothing acknowledged was lost, and nothing was stored twice. Both backends.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { kill9, type Node, sleep, startNode } from '../helpers/cluster.ts';
import { createTenant, createTestContext, DIALECT, type TestContext, type TestTenant } from '../helpers/context.ts';
import { killChildren, SPAWN_TEST_TIMEOUT_MS } from '../helpers/server-process.ts';

let ctx: TestContext;
let t: TestTenant;
const nodes: Node[] = [];

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
  killChildren();
  await ctx?.close();
});

const CLIENTS = 24;
const body = (key: string) => ({
  recipients: [{ email: `${key}@example.com` }, { email: `${key}-cc@example.com` }],
  content: { subject: 'batched crash', text: 'exactly once' },
  options: { metadata: { k: key } },
});

it(
  `no acknowledged accept lost and none stored twice after kill -9 mid-batch (${DIALECT})`,
  async () => {
    const first = await startNode(ctx, 'b1', 'api');
    nodes.push(first);
    const acked = new Map<string, string>(); // key -> transmission id
    const unanswered: string[] = [];
    const refused: string[] = [];
    let stop = false;
    let seq = 0;
    const post = (node: Node, key: string) =>
      fetch(`${node.baseUrl}/v1/transmissions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body(key)),
        signal: AbortSignal.timeout(30_000),
      });
    const client = async () => {
      while (!stop) {
        const key = `k${seq++}`;
        try {
          const res = await post(first, key);
          const json = (await res.json()) as { transmission_id?: string };
          if (res.status === 202 && json.transmission_id) acked.set(key, json.transmission_id);
          else refused.push(`${key}: ${res.status} ${JSON.stringify(json).slice(0, 200)}`);
        } catch {
          unanswered.push(key);
          return;
        }
      }
    };
    const clients = Array.from({ length: CLIENTS }, client);
    while (acked.size < 300) {
      if (refused.length > 0) throw new Error(`refused before the kill: ${refused.slice(0, 3).join(', ')}`);
      await sleep(20);
    }
    await kill9(first);
    stop = true;
    await Promise.all(clients);
    nodes.splice(0);
    expect(refused).toEqual([]);
    expect(unanswered.length, 'requests cut by the kill').toBeGreaterThan(0);

    // A new node on the same database; every unanswered request is sent again with its key.
    const second = await startNode(ctx, 'b2', 'api');
    nodes.push(second);
    for (const key of unanswered) {
      const deadline = Date.now() + 90_000;
      for (;;) {
        const res = await post(second, key);
        const json = (await res.json()) as { transmission_id?: string; error?: { code?: string } };
        if (res.status === 202 && json.transmission_id) {
          acked.set(key, json.transmission_id);
          break;
        }
        // The dead node's claim on the key is released once its death is known (node registry).
        expect(res.status, JSON.stringify(json)).toBe(409);
        if (Date.now() > deadline) throw new Error(`key ${key} still in progress after 90 s`);
        await sleep(500);
      }
    }
    // Replays answer with the stored transmission.
    const some = [...acked.entries()].slice(0, 5);
    for (const [key, id] of some) {
      const res = await post(second, key);
      expect(res.status).toBe(202);
      expect(((await res.json()) as { transmission_id: string }).transmission_id).toBe(id);
    }

    const db = ctx.c.database.db;
    const rows = await db
      .selectFrom('transmissions')
      .select(['id', 'metadata'])
      .where('tenant_id', '=', t.tenantId)
      .execute();
    const byKey = new Map<string, string[]>();
    for (const r of rows) {
      const k = (JSON.parse(r.metadata) as { k: string }).k;
      byKey.set(k, [...(byKey.get(k) ?? []), r.id]);
    }
    const keyed = [...acked.keys()];
    for (const key of keyed) expect(byKey.get(key), key).toEqual([acked.get(key)]);
    // Nothing stored under a key that was never answered 202.
    expect([...byKey.keys()].filter((k) => !acked.has(k))).toEqual([]);
    const ids = keyed.map((k) => acked.get(k) as string);
    const count = async (table: 'messages' | 'events') =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .where('transmission_id', 'in', ids)
            .executeTakeFirstOrThrow()
        ).n,
      );
    expect(await count('messages')).toBe(ids.length * 2);
    expect(await count('events')).toBe(ids.length * 2);
    console.log(`[batched-crash] ${acked.size} keys, ${unanswered.length} cut by the kill and sent again`);
  },
  SPAWN_TEST_TIMEOUT_MS,
);
