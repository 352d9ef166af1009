/**
 * The set-up of the pacing tests that compare two tenants' mail at one destination
 * (fairness.test.ts, connection-overrides.test.ts): one Postyard context, two tenants sending
 * from shop.test, the sink MX they both deliver to. Each test starts its own worker.
 */
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import type { TestSigningKey } from '../helpers/delivery.ts';
import { startDestination } from '../helpers/destination.ts';
import type { SinkMx } from '../peers/sink-mx.ts';

export interface TwoTenants {
  ctx: TestContext;
  a: TestTenant;
  b: TestTenant;
  sink: SinkMx;
  /** Closes the context, then the sink and DNS server; stop the worker first. */
  close(): Promise<void>;
}

export async function startTwoTenants(signing: TestSigningKey): Promise<TwoTenants> {
  const destination = await startDestination({ signing });
  let ctx: TestContext | undefined;
  try {
    ctx = await createTestContext({ env: destination.env });
    const a = await createTenant(ctx, 'Shop <news@shop.test>');
    const b = await createTenant(ctx, 'Shop <news@shop.test>');
    const opened = ctx;
    return {
      ctx,
      a,
      b,
      sink: destination.sink,
      async close() {
        await opened.close();
        await destination.close();
      },
    };
  } catch (err) {
    // The test's afterAll has nothing to close yet: close what was started here.
    await ctx?.close();
    await destination.close();
    throw err;
  }
}
