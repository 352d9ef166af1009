import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { createSourcePicker } from '../../src/modules/ip-pools/source-picker.ts';
import { call, createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';
import type { SinkMx } from '../peers/sink-mx.ts';

/**
 * Two worker nodes on one database (two containers, each with its own connections and worker):
 * a warmup cap holds for both together, and mail types pick their pools on either node.
 */
let node1: TestContext;
let node2: TestContext;
let destination: Destination;
let sink: SinkMx;
const workers: DeliveryWorker[] = [];
const signing = testSigningKey();

beforeAll(async () => {
  destination = await startDestination({ signing });
  sink = destination.sink;
  const env = { ...destination.env, POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3,127.0.0.4' };
  node1 = await createTestContext({ env });
  node2 = await createTestContext({ env, shareWith: node1 });
  for (const [i, n] of [node1, node2].entries()) {
    const id = `node-${i + 1}`;
    workers.push(startTestWorker(n.c, id, { signing, sources: createSourcePicker(n.c, id, { refreshMs: 0 }) }));
  }
});
afterAll(async () => {
  for (const w of workers) await w.stop();
  await node2?.close();
  await node1?.close();
  await destination?.close();
});

async function states(transmissionId: string) {
  return node1.c.database.db
    .selectFrom('messages')
    .select(['recipient', 'state', 'source_address', 'attempt_count'])
    .where('transmission_id', '=', transmissionId)
    .execute();
}

async function until(what: string, fn: () => Promise<boolean>, ms = 20_000) {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('IP pools on two nodes', () => {
  it('a daily warmup cap of 6 holds for both nodes together: 6 of 30 go out, 24 wait, none fail', async () => {
    const t = await createTenant(node1, 'Shop <news@shop.test>');
    const post = async (url: string, body: unknown) => {
      const res = await call(node1.app, 'POST', url, { key: t.apiKey, body });
      expect(res.statusCode, res.body).toBeLessThan(300);
      return res.json();
    };
    const policy = await post('/v1/warmup-policies', {
      stages: [{ day: 1, daily_limit: 6 }],
      max_bounce_rate: 0.1,
      max_complaint_rate: 0.01,
    });
    await node1.c.sourceAddresses.dedicate('127.0.0.4', t.tenantId);
    await post('/v1/ip-pools', {
      name: 'cold',
      default: true,
      addresses: [{ address: '127.0.0.4', warmup_policy_id: policy.id }],
    });
    // Three transmissions, so both nodes claim some of the messages.
    const ids: string[] = [];
    for (let k = 0; k < 3; k++)
      ids.push(
        (
          await post('/v1/transmissions', {
            recipients: Array.from({ length: 10 }, (_, i) => ({ email: `c${k}-${i}@dest.test` })),
            content: { subject: 'Hi', text: 'Hello' },
          })
        ).transmission_id,
      );
    const all = async () => (await Promise.all(ids.map(states))).flat();
    await until('6 delivered, 24 waiting', async () => {
      const r = await all();
      return (
        r.filter((x) => x.state === 'delivered').length === 6 && r.filter((x) => x.state === 'queued').length === 24
      );
    });
    // Both nodes keep claiming the waiting ones only when due (tomorrow): nothing more goes out.
    await new Promise((r) => setTimeout(r, 1500));
    const r = await all();
    expect(r.filter((x) => x.state === 'delivered')).toHaveLength(6);
    expect(r.filter((x) => x.state === 'queued' && x.attempt_count === 0)).toHaveLength(24);
    const sent = sink.messages.filter((m) => m.rcptTo[0]?.startsWith('c'));
    expect(sent).toHaveLength(6);
    expect(new Set(sent.map((m) => m.remoteAddress))).toEqual(new Set(['127.0.0.4']));
  });

  it("each mail type leaves from its tenant's pool for that type", async () => {
    const t = await createTenant(node1, 'Shop <news@shop.test>');
    const post = async (url: string, body: unknown) => {
      const res = await call(node1.app, 'POST', url, { key: t.apiKey, body });
      expect(res.statusCode, res.body).toBeLessThan(300);
      return res.json();
    };
    await post('/v1/ip-pools', { name: 'tx', default: true, addresses: [{ address: '127.0.0.2' }] });
    await post('/v1/ip-pools', { name: 'mkt', mail_types: ['marketing'], addresses: [{ address: '127.0.0.3' }] });
    const send = async (mail_type: string, n: number) =>
      (
        await post('/v1/transmissions', {
          recipients: Array.from({ length: n }, (_, i) => ({ email: `${mail_type}-${i}@dest.test` })),
          content: { subject: 'Hi', text: 'Hello' },
          options: { mail_type },
        })
      ).transmission_id as string;
    const mkt = await send('marketing', 5);
    const tx = await send('transactional', 5);
    await until('all delivered', async () =>
      (await Promise.all([mkt, tx].map(states))).flat().every((x) => x.state === 'delivered'),
    );
    const from = (prefix: string) =>
      new Set(sink.messages.filter((m) => m.rcptTo[0]?.startsWith(prefix)).map((m) => m.remoteAddress));
    expect(from('marketing-')).toEqual(new Set(['127.0.0.3']));
    expect(from('transactional-')).toEqual(new Set(['127.0.0.2']));
  });
});
