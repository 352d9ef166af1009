import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import type { SinkMx } from '../peers/sink-mx.ts';
import { startTwoTenants, type TwoTenants } from './two-tenants.ts';

/**
 * Fairness (issue 18, docs/pacing.md): tenant A's backlog of 20,000 marketing messages must not
 * hold back tenant B's transactional message to the same destination. Before the fair claim the
 * queue was one FIFO by due time, so B's message waited behind every one of A's.
 */
let scene: TwoTenants;
let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;
let sink: SinkMx;
let worker: DeliveryWorker;
const signing = testSigningKey();

beforeAll(async () => {
  scene = await startTwoTenants(signing);
  ({ ctx, a, b, sink } = scene);
}, 60_000);
afterAll(async () => {
  await worker?.stop();
  await scene?.close();
});

async function send(t: TestTenant, recipients: string[], campaign: boolean) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: recipients.map((email) => ({ email })),
      content: { subject: campaign ? 'Sale' : 'Your code', text: campaign ? 'Everything must go' : '123456' },
      options: { mail_type: campaign ? 'marketing' : 'transactional' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  return res.json().transmission_id as string;
}

describe('fairness across tenants', () => {
  it("tenant B's transactional message reaches the sink within 2 s of A's 20,000 queued marketing messages", async () => {
    for (let batch = 0; batch < 2; batch++) {
      await send(
        a,
        Array.from({ length: 10_000 }, (_, i) => `a${batch}-${i}@dest.test`),
        true,
      );
    }
    const marketing = await ctx.c.database.db
      .selectFrom('messages')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('tenant_id', '=', a.tenantId)
      .where('priority', '=', 1)
      .executeTakeFirstOrThrow();
    expect(Number(marketing.n)).toBe(20_000);
    worker = startTestWorker(ctx.c, 'fair-worker', { signing });
    // The worker is busy with A's backlog before B sends.
    await sink.waitForMessages(200, 30_000);
    const sentAt = Date.now();
    await send(b, ['reset@dest.test'], false);
    // Where B's time went, for the failure message: accepted, claimed (leased), sent.
    const ofAAt = () => sink.messages.filter((m) => m.rcptTo[0]?.startsWith('a') && m.receivedAt >= sentAt).length;
    const steps = [`accepted after ${Date.now() - sentAt} ms and ${ofAAt()} of A's`];
    const deadline = sentAt + 15_000;
    let arrived: number | null = null;
    while (Date.now() < deadline) {
      if (steps.length === 1) {
        const leased = await ctx.c.database.db
          .selectFrom('messages')
          .select('locked_by')
          .where('tenant_id', '=', b.tenantId)
          .executeTakeFirst();
        if (leased?.locked_by) steps.push(`claimed after ${Date.now() - sentAt} ms and ${ofAAt()} of A's`);
      }
      const m = sink.messages.find((x) => x.rcptTo.includes('reset@dest.test'));
      if (m) {
        arrived = m.receivedAt;
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(arrived, 'B never arrived').not.toBeNull();
    const ofA = sink.messages.filter((m) => m.rcptTo[0]?.startsWith('a'));
    // A's backlog was still there when B arrived: B did not just come after it.
    expect(ofA.length).toBeLessThan(20_000);
    // How many of A's messages went out between B's accept and B's arrival. The figure is
    // "within 2 s", printed here; what is asserted is this count, which a loaded machine does not
    // change (it slows A's and B's mail alike): with the fair claim, B is in the next claim and
    // first in its domain queue, so only what was already in A's sessions and one claim of A's can
    // go before it. The old FIFO claim sent A's whole in-flight share first (1,000 of the worker's
    // 2,000), then every later claim was A's again until its backlog ran out. A busy render thread
    // also held B back once (CI: 2,859 of A's): it rendered every request that came while B's new
    // body was being composed (render-thread.ts, src/modules/delivery/render/render-pool.test.ts).
    const between = ofA.filter((m) => m.receivedAt >= sentAt && m.receivedAt <= (arrived as number));
    const perSession = new Map<number, number>();
    for (const m of between) perSession.set(m.remotePort, (perSession.get(m.remotePort) ?? 0) + 1);
    const story = `${steps.join('; ')}; sent after ${(arrived as number) - sentAt} ms; A's per session meanwhile: ${[...perSession.values()].join(', ')}`;
    console.log(`fairness: ${story}`);
    expect(between.length, story).toBeLessThan(400);
  }, 180_000);
});
