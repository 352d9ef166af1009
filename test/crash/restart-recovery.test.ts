/**
 * Crash recovery at once (issue 13, item 12). A node killed with SIGKILL leaves messages in
 * `sending`, webhook units and Idempotency-Key claims in its name. A node restarted on the same
 * data takes its own claims back when it starts (its node id survives restarts: <data dir>/node-id
 * or POSTYARD_NODE_ID), instead of waiting for the 300 s delivery lease or the 60 s idempotency
 * lock; on PostgreSQL a node that stops heartbeating has its claims taken over by the others
 * (default: silent for 20 s). Default leases and intervals throughout: nothing is shortened here.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { inPool, kill9, messageIdsAtSink, type Node, sleep, startNode, until } from '../helpers/cluster.ts';
import { killChildren, SPAWN_TIMEOUT_MS } from '../helpers/server-process.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';

const MESSAGES = 1500; // accepted before the kill, in transmissions of 500
const KEYED_REQUESTS = 2000;
// Each test starts node processes (up to SPAWN_TIMEOUT_MS each under load) and waits up to 60 s.
const TEST_MS = 2 * SPAWN_TIMEOUT_MS + 180_000;

describe(`restart after kill -9 takes the dead node's claims back at once (${DIALECT})`, () => {
  let ctx: TestContext;
  let sink: SinkMx;
  let dns: DnsServer;
  let t: TestTenant;
  let env: Record<string, string>;
  const nodes: Node[] = [];

  beforeAll(async () => {
    sink = await startSinkMx({ tls: false });
    dns = await startDnsServer({
      'recover.test': { MX: [{ preference: 10, exchange: 'mx.recover.test' }] },
      'mx.recover.test': { A: ['127.0.0.1'] },
    });
    ctx = await createTestContext();
    t = await createTenant(ctx, 'Recover <r@recover-sender.test>');
    env = { POSTYARD_DNS_SERVERS: dns.address, POSTYARD_MX_PORT: String(sink.port) };
  }, 120_000);

  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop('SIGKILL')));
  });

  afterAll(async () => {
    killChildren();
    await sink?.close();
    await dns?.close();
    await ctx?.close();
  });

  const db = () => ctx.c.database.db;
  const start = async (name: string, extra: Record<string, string> = {}) => {
    const n = await startNode(ctx, name, 'api,worker', { ...env, ...extra });
    nodes.push(n);
    return n;
  };
  const heldBy = async (n: Node) =>
    Number(
      (
        await db()
          .selectFrom('messages')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('state', '=', 'sending')
          .where('locked_by', 'like', n.holderPattern)
          .executeTakeFirstOrThrow()
      ).n,
    );

  async function accept(prefix: string, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 500) {
      const n = Math.min(500, count - i);
      const res = await call(ctx.app, 'POST', '/v1/transmissions', {
        key: t.apiKey,
        body: {
          recipients: Array.from({ length: n }, (_, k) => ({ email: `${prefix}-${i + k}@recover.test` })),
          content: { subject: `recover ${prefix}`, text: 'sent again after a crash, at once' },
        },
      });
      expect(res.statusCode, res.body).toBe(202);
      const tx = res.json().transmission_id as string;
      const rows = await db().selectFrom('messages').select('id').where('transmission_id', '=', tx).execute();
      ids.push(...rows.map((r) => r.id));
    }
    return ids;
  }

  const missingAtSink = (ids: readonly string[]) => {
    const seen = messageIdsAtSink(sink);
    return ids.filter((id) => !seen.has(id));
  };

  it(
    'kill -9 while delivering 1,500 messages: after a restart every message reaches the sink within 60 s',
    async () => {
      const ids = await accept('restart', MESSAGES);
      const sinkBefore = sink.messages.length;
      const victim = await start('restart-node');
      // Kill as soon as the node is sending: it holds nearly all of the 1,500 in `sending` then.
      await until(
        () => sink.messages.length > sinkBefore,
        60_000,
        () => 'no message reached the sink',
        10,
      );
      await kill9(victim);
      const held = await heldBy(victim);
      const restarted = await start('restart-node');
      const restartedAt = Date.now();
      await until(
        () => missingAtSink(ids).length === 0,
        60_000,
        async () =>
          `${missingAtSink(ids).length} of ${MESSAGES} not at the sink 60 s after the restart; the dead node held ${held}; ` +
          JSON.stringify(
            await db()
              .selectFrom('messages')
              .select(['state', 'locked_by', (eb) => eb.fn.countAll().as('n')])
              .where('id', 'in', missingAtSink(ids).slice(0, 500))
              .groupBy(['state', 'locked_by'])
              .execute(),
          ),
        100,
      );
      console.log(
        `[recover] ${DIALECT}: the killed node held ${held} of ${MESSAGES} messages in sending; ` +
          `all at the sink ${Date.now() - restartedAt} ms after the restart (node ${restarted.child.pid})`,
      );
      expect(held, 'the kill should land while the node holds messages').toBeGreaterThan(0);
    },
    TEST_MS,
  );

  it(
    'kill -9 during 2,000 keyed requests: every retry with the same key succeeds within 10 s of the restart',
    async () => {
      let node = await start('keyed-node');
      const keys = Array.from({ length: KEYED_REQUESTS }, (_, i) => `crash-key-${i}`);
      const bodyOf = (i: number) => ({
        recipients: [{ email: `keyed-${i}@recover.test` }],
        content: { subject: `keyed ${i}`, text: 'one transmission per key, however often retried' },
      });
      const post = async (i: number) => {
        try {
          const res = await fetch(`${node.baseUrl}/v1/transmissions`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${t.apiKey}`,
              'content-type': 'application/json',
              'idempotency-key': keys[i] as string,
            },
            body: JSON.stringify(bodyOf(i)),
            signal: AbortSignal.timeout(30_000),
          });
          const body = (await res.json()) as { transmission_id?: string; errors?: { code: string }[] };
          return { status: res.status, tx: body.transmission_id ?? null, code: body.errors?.[0]?.code ?? null };
        } catch {
          return { status: null, tx: null, code: null };
        }
      };

      const inProgress = async () =>
        Number(
          (
            await db()
              .selectFrom('idempotency_keys')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('state', '=', 'in_progress')
              .executeTakeFirstOrThrow()
          ).n,
        );
      // First run: 32 clients; the node is killed once a quarter of the keys have their answer and
      // some keys are claimed (committed in_progress) at that moment. Since accepts are batched a
      // claim lives only for one batch, so "a quarter answered" alone sometimes killed the node
      // between batches with no claim held (CI: 0 claims left, the test's premise not met). The
      // count read after the kill can still be 0 (seen locally, cause not found), so the premise
      // is the count read in the turn of the kill.
      const first = new Map<number, Awaited<ReturnType<typeof post>>>();
      let answered = 0;
      let killed = false;
      let claimsAtKill = 0;
      const killing = (async () => {
        await until(
          async () => {
            if (answered < KEYED_REQUESTS / 4) return false;
            claimsAtKill = await inProgress();
            if (claimsAtKill === 0) return false;
            // SIGKILL in the same turn as the read that saw the claims: awaiting anything first
            // gave the node time to finish its batch (0 claims left, seen on SQLite).
            node.child.kill('SIGKILL');
            return true;
          },
          120_000,
          () => `${answered} answered, no claim in progress seen`,
          2,
        );
        await kill9(node);
        killed = true;
      })();
      await inPool(keys, 32, async (_k, i) => {
        if (killed) return;
        const r = await post(i);
        first.set(i, r);
        if (r.status === 202) answered++;
      });
      await killing;
      const claimsLeft = await inProgress();

      node = await start('keyed-node');
      const restartedAt = Date.now();
      // The retries: every key sent before the kill that has no 202 (in flight at the kill, or
      // refused as the node went down), each retried (Retry-After: 1 s) until it has its 202, for at
      // most 10 s after the restart. Then the answered keys once more (each must replay its own
      // transmission) and the keys never sent.
      const retried = [...first].filter(([, r]) => r.status !== 202).map(([i]) => i);
      const late: string[] = [];
      const outcome = new Map<number, { status: number | null; tx: string | null; code: string | null }>();
      await inPool(retried, 16, async (i) => {
        for (;;) {
          const r = await post(i);
          outcome.set(i, r);
          if (r.status === 202) return;
          if (Date.now() - restartedAt > 10_000) {
            late.push(`${keys[i]}: ${r.status} ${r.code}`);
            return;
          }
          await sleep(1000);
        }
      });
      const lastRetryMs = Date.now() - restartedAt;
      await inPool(
        keys.map((_k, i) => i).filter((i) => !retried.includes(i)),
        16,
        async (i) => {
          outcome.set(i, await post(i));
        },
      );

      const replayMismatch = [...first].filter(([i, r]) => r.status === 202 && outcome.get(i)?.tx !== r.tx);
      const notAccepted = [...outcome].filter(([, r]) => r.status !== 202).map(([i, r]) => `${keys[i]}: ${r.status}`);
      const txCount = Number(
        (
          await db()
            .selectFrom('transmissions')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('tenant_id', '=', t.tenantId)
            .where('content', 'like', '%"keyed %')
            .executeTakeFirstOrThrow()
        ).n,
      );
      console.log(
        `[recover] ${DIALECT}: ${answered} keyed requests answered before the kill, ${claimsAtKill} claims in progress at the kill, ${claimsLeft} after it; ` +
          `${retried.length} keys without an answer retried, the last one accepted ${lastRetryMs} ms after the restart`,
      );
      expect(claimsAtKill, 'the kill should land while requests hold their keys').toBeGreaterThan(0);
      expect(late).toEqual([]);
      expect(replayMismatch).toEqual([]);
      expect(notAccepted).toEqual([]);
      expect(txCount).toBe(KEYED_REQUESTS); // one transmission per key: no key ran twice
    },
    TEST_MS,
  );

  it.runIf(DIALECT === 'postgres')(
    'two nodes on PostgreSQL: kill one, the other finishes its messages within 60 s',
    async () => {
      const a = await start('pair-a', { POSTYARD_NODE_ID: 'pair-a' });
      const b = await start('pair-b', { POSTYARD_NODE_ID: 'pair-b' });
      const sinkBefore = sink.messages.length;
      const ids = await accept('pair', MESSAGES);
      // SIGKILL in the turn that saw node a holding messages: awaiting first let it finish the few
      // it held (0 held after the kill, the premise unmet, seen once on PostgreSQL).
      let held = 0;
      await until(
        async () => {
          if (sink.messages.length <= sinkBefore) return false;
          held = await heldBy(a);
          if (held === 0) return false;
          a.child.kill('SIGKILL');
          return true;
        },
        60_000,
        () => 'node a never held messages while the sink received',
        10,
      );
      await kill9(a);
      const killedAt = Date.now();
      await until(
        () => missingAtSink(ids).length === 0,
        60_000,
        () => `${missingAtSink(ids).length} of ${MESSAGES} not at the sink 60 s after the kill (a held ${held})`,
        100,
      );
      console.log(
        `[recover] two nodes: a held ${held} messages when killed; all at the sink ${Date.now() - killedAt} ms later (b ${b.child.pid})`,
      );
      expect(held, 'the kill should land while node a holds messages').toBeGreaterThan(0);
    },
    TEST_MS,
  );
});
