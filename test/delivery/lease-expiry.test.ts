import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';

/**
 * A message whose lease runs out while this same worker is still sending it is due again, and
 * the worker's next claim takes it back under the same holder id. Before, that second copy was
 * dispatched and sent as well, and both outcomes passed the `locked_by = <worker>` check: the
 * recipient got the mail twice and two message.delivered events were recorded (PostgreSQL CI:
 * 1,501 events for 1,500 messages with a 5 s lease on a loaded machine). The claim now only
 * renews the lease of a message the worker already holds.
 */
const signing = testSigningKey();
let dest: Destination;
let ctx: TestContext;
let t: TestTenant;
let worker: DeliveryWorker | undefined;

beforeAll(async () => {
  // Every DATA reply comes 1.5 s late: longer than the whole 1.2 s lease below.
  dest = await startDestination({ signing, sink: { dataDelayMs: 1_500 } });
  ctx = await createTestContext({ env: dest.env });
  t = await createTenant(ctx, 'Shop <news@shop.test>');
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await dest?.close();
});

describe('a lease that ends while its own worker is sending', () => {
  it('is renewed by the next claim, not sent or reported a second time', async () => {
    const n = 4;
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: Array.from({ length: n }, (_, i) => ({ email: `slow${i}@dest.test` })),
        content: { subject: 'Slow', text: 'Hello' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().transmission_id as string;
    worker = startTestWorker(ctx.c, 'lease-worker', { signing, leaseMs: 1_200, pollMs: 20 });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const left = await ctx.c.database.db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('transmission_id', '=', id)
        .where('state', '!=', 'delivered')
        .executeTakeFirstOrThrow();
      if (Number(left.n) === 0) break;
      if (Date.now() > deadline) throw new Error(`${left.n} of ${n} not delivered`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Long enough for a second copy taken by a re-claim to finish its own slow DATA.
    await new Promise((r) => setTimeout(r, 2_500));
    await worker.flush();
    const received = dest.sink.messages.map((m) => m.rcptTo[0]).sort();
    expect(received).toEqual(Array.from({ length: n }, (_, i) => `slow${i}@dest.test`).sort());
    const events = await ctx.c.database.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('transmission_id', '=', id)
      .where('type', '=', 'message.delivered')
      .executeTakeFirstOrThrow();
    expect(Number(events.n)).toBe(n);
  }, 60_000);
});
