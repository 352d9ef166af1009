import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

/** SIGTERM contract at the HTTP layer: in-flight requests finish; late ones get a clean 503. */
let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  // The in-flight request must finish however slow a loaded machine makes it: the grace window
  // (default 8 s, after which connections are cut) is not what this test is about. close() may
  // also wait that long for a keep-alive connection the late request opened.
  ctx = await createTestContext({ env: { POSTYARD_SHUTDOWN_GRACE_SECONDS: '20' } });
  t = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

describe('closing the HTTP server', () => {
  it('finishes a request in flight; a late request is refused or gets the contract 503', async () => {
    const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const big = JSON.stringify({
      recipients: Array.from({ length: 10_000 }, (_, i) => ({ email: `s${i}@example.com` })),
      content: { subject: 's', text: 't' },
    });
    // Close only once the server has taken the request in (its onRequest hooks have run by the
    // time a listener added after Fastify's sees the event), so it is truly in flight.
    const received = new Promise<void>((resolve) => ctx.app.server.once('request', () => resolve()));
    const inFlight = fetch(`${url}/v1/transmissions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
      body: big,
    });
    await received;
    const closed = ctx.app.close();
    // A request arriving now is refused (listener closed) or answered with the contract 503.
    const late = await fetch(`${url}/v1/api-keys`, { headers: { authorization: `Bearer ${t.apiKey}` } }).then(
      async (r) => ({ status: r.status, body: await r.json() }),
      () => ({ status: 0, body: null }),
    );
    if (late.status !== 0) {
      expect(late.status).toBe(503);
      expect(late.body).toEqual({ errors: [{ code: 'unavailable', message: expect.any(String) }] });
    }
    const res = await inFlight;
    expect(res.status).toBe(202);
    await closed;
  }, 90_000);
});
