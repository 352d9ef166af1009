/**
 * The client's failure behaviour (seed section 7) against the real server through a proxy that
 * injects 502s, 429s with Retry-After, dropped connections and slow answers.
 */
import { createServer } from 'node:net';
import { PostyardError, PostyardNetworkError, type RetryInfo } from '@postyard/client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { errorBody } from './fault-proxy.ts';
import { countRows, type LiveServer, MAIL, startLiveServer } from './helpers.ts';

let live: LiveServer;
const TX = '/v1/transmissions';
const tx502 = (n: number) => ({ kind: 'status' as const, status: 502, body: errorBody('bad_gateway', `fault ${n}`) });

beforeAll(async () => {
  live = await startLiveServer();
});
afterAll(async () => {
  await live?.close();
});
beforeEach(() => live.proxy.reset());

const transmissions = () => countRows(live.ctx, 'transmissions', live.tenant.tenantId);

// Timeouts are generous (1-1.5 s) so that only the injected slow answers time out, even on a busy CI machine.
describe('one logical call, one transmission', () => {
  it('survives a 502, a connection dropped after the server acted, a slow answer and a 429', async () => {
    const before = await transmissions();
    live.proxy.inject(
      [
        tx502(1),
        { kind: 'drop-after' },
        { kind: 'delay', ms: 5000 },
        { kind: 'status', status: 429, headers: { 'retry-after': '0' }, body: errorBody('rate_limited', 'slow down') },
      ],
      TX,
    );
    const retries: RetryInfo[] = [];
    const client = live.client({ maxRetries: 5, timeoutMs: 1500, onRetry: (r) => retries.push(r) });
    const res = await client.transmissions.send(MAIL);

    expect(await transmissions()).toBe(before + 1);
    const attempts = live.proxy.attempts(TX);
    expect(attempts.map((a) => a.fault)).toEqual(['status', 'drop-after', 'delay', 'status', 'pass']);
    // One key, made by the client, on every attempt.
    const keys = new Set(attempts.map((a) => a.idempotencyKey));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f-]{36}$/);
    // The server acted on attempt 2; attempts 3 and 5 were replays of that stored answer.
    expect(attempts[1]?.upstreamStatus).toBe(202);
    expect(attempts[4]?.upstreamHeaders?.['idempotent-replayed']).toBe('true');
    const row = await live.ctx.c.database.db
      .selectFrom('transmissions')
      .select('id')
      .where('tenant_id', '=', live.tenant.tenantId)
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    expect(res.transmission_id).toBe(row.id);
    expect(retries.map((r) => r.error.code)).toEqual(['bad_gateway', 'network_error', 'timeout', 'rate_limited']);
  });

  it('a slow answer times the attempt out; the retry gets the stored answer', async () => {
    const before = await transmissions();
    live.proxy.inject([{ kind: 'delay', ms: 5000 }], TX);
    const res = await live.client({ timeoutMs: 1000 }).transmissions.send(MAIL);
    expect(await transmissions()).toBe(before + 1);
    const attempts = live.proxy.attempts(TX);
    expect(attempts).toHaveLength(2);
    expect(attempts[1]?.upstreamHeaders?.['idempotent-replayed']).toBe('true');
    expect(res.total_accepted_recipients).toBe(1);
  });

  it('a connection dropped before the request arrived is retried', async () => {
    const before = await transmissions();
    live.proxy.inject([{ kind: 'drop-before' }], TX);
    await live.client().transmissions.send(MAIL);
    expect(await transmissions()).toBe(before + 1);
    expect(live.proxy.attempts(TX).map((a) => a.fault)).toEqual(['drop-before', 'pass']);
  });

  it("the caller's Idempotency-Key is sent on every attempt and makes repeated calls safe", async () => {
    const before = await transmissions();
    live.proxy.inject([tx502(1), { kind: 'drop-after' }], TX);
    const client = live.client();
    const first = await client.transmissions.send(MAIL, { idempotencyKey: 'order-1001' });
    const again = await client.transmissions.send(MAIL, { idempotencyKey: 'order-1001' });
    expect(again.transmission_id).toBe(first.transmission_id);
    expect(await transmissions()).toBe(before + 1);
    expect(new Set(live.proxy.attempts(TX).map((a) => a.idempotencyKey))).toEqual(new Set(['order-1001']));
  });
});

describe('never retried', () => {
  it('409 idempotency_key_reused: one attempt, typed error', async () => {
    const client = live.client();
    await client.transmissions.send(MAIL, { idempotencyKey: 'reused-key' });
    live.proxy.reset();
    const err = await client.transmissions
      .send({ ...MAIL, content: { subject: 'Other', text: 'x' } }, { idempotencyKey: 'reused-key' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostyardError);
    expect(err).toMatchObject({ status: 409, code: 'idempotency_key_reused', attempts: 1 });
    expect(live.proxy.attempts(TX)).toHaveLength(1);
  });

  it('422: one attempt; errors[] names the fields; requestId is the X-Request-ID', async () => {
    const before = await transmissions();
    const err = (await live
      .client()
      .transmissions.send({ recipients: [{ email: 'not-an-address' }], content: { subject: 's' } })
      .catch((e: unknown) => e)) as PostyardError;
    expect(err).toBeInstanceOf(PostyardError);
    expect(err.status).toBe(422);
    expect(err.code).toBe('validation_failed');
    expect(err.errors.map((e) => e.field)).toEqual(expect.arrayContaining(['recipients[0].email', 'content']));
    expect(Object.keys(err.fieldErrors)).toContain('recipients[0].email');
    const attempts = live.proxy.attempts(TX);
    expect(attempts).toHaveLength(1);
    expect(err.requestId).toBe(attempts[0]?.upstreamHeaders?.['x-request-id']);
    expect(err.message).toContain(err.requestId as string);
    expect(await transmissions()).toBe(before);
  });

  it('other 4xx (401, 404) are final', async () => {
    const bad = live.client({ apiKey: 'pyk_not_a_key' });
    await expect(bad.transmissions.send(MAIL)).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    await expect(live.client().messages.get('0193a4f1-0000-7000-8000-000000000000')).rejects.toMatchObject({
      status: 404,
      code: 'not_found',
      attempts: 1,
    });
    expect(live.proxy.log).toHaveLength(2);
  });

  it('a redirect is not followed (a POST must not turn into a GET elsewhere) and says where to', async () => {
    live.proxy.inject([
      { kind: 'status', status: 301, headers: { location: 'https://mail.example.com/v1/transmissions' } },
    ]);
    const err = await live
      .client()
      .transmissions.send(MAIL)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 301, attempts: 1 });
    expect((err as Error).message).toContain('redirected to https://mail.example.com/v1/transmissions');
  });

  it('rotate-secret (not idempotent) is not retried once the server may have acted, but is after a 429', async () => {
    const client = live.client();
    const hook = await client.webhooks.create({ url: 'http://127.0.0.1:9/hook' });
    const path = `/v1/webhooks/${hook.id}/rotate-secret`;
    live.proxy.inject([tx502(1)], path);
    await expect(client.webhooks.rotateSecret(hook.id)).rejects.toMatchObject({ status: 502, attempts: 1 });
    live.proxy.inject([{ kind: 'status', status: 429, headers: { 'retry-after': '0' } }], path);
    const rotated = await client.webhooks.rotateSecret(hook.id);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(live.proxy.attempts(path).map((a) => a.fault)).toEqual(['status', 'status', 'pass']);
  });
});

describe('the retry cap', () => {
  it('gives up after 1 + maxRetries attempts and surfaces the last error', async () => {
    const before = await transmissions();
    live.proxy.inject([tx502(1), tx502(2), tx502(3), tx502(4), tx502(5)], TX);
    const err = (await live
      .client()
      .transmissions.send(MAIL)
      .catch((e: unknown) => e)) as PostyardError;
    expect(err).toBeInstanceOf(PostyardError);
    expect(err.status).toBe(502);
    expect(err.attempts).toBe(4);
    expect(err.errors[0]?.message).toBe('fault 4');
    expect(live.proxy.pending()).toBe(1);
    expect(await transmissions()).toBe(before);
  });

  it('timeouts on every attempt end in a PostyardNetworkError with code timeout', async () => {
    live.proxy.inject(
      Array.from({ length: 3 }, () => ({ kind: 'delay' as const, ms: 1000 })),
      TX,
    );
    const err = await live
      .client({ timeoutMs: 150, maxRetries: 2 })
      .transmissions.send(MAIL)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostyardNetworkError);
    expect(err).toMatchObject({ status: 0, code: 'timeout', attempts: 3 });
  });

  it('a refused connection is retried, then surfaced as a network error', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const retries: RetryInfo[] = [];
    const client = live.client({ baseUrl: `http://127.0.0.1:${port}`, maxRetries: 2, onRetry: (r) => retries.push(r) });
    const err = await client.events.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostyardNetworkError);
    expect(err).toMatchObject({ code: 'network_error', attempts: 3 });
    expect((err as Error).message).toContain('ECONNREFUSED');
    expect(retries).toHaveLength(2);
  });
});

describe('backoff', () => {
  it('honours Retry-After (seconds) before retrying a 429', async () => {
    live.proxy.inject([
      { kind: 'status', status: 429, headers: { 'retry-after': '1' }, body: errorBody('rate_limited', 'x') },
    ]);
    await live.client().events.list();
    const [a, b] = live.proxy.attempts('/v1/events');
    const waited = (b?.at ?? 0) - (a?.at ?? 0);
    expect(waited).toBeGreaterThanOrEqual(950);
    expect(waited).toBeLessThan(5000);
  });

  it('a Retry-After beyond maxRetryAfterMs is surfaced instead of slept through', async () => {
    live.proxy.inject([{ kind: 'status', status: 503, headers: { 'retry-after': '3600' } }]);
    const err = await live
      .client()
      .events.list()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, retryAfterMs: 3_600_000, attempts: 1 });
  });

  it('409 idempotency_in_progress (an earlier attempt of this call still running) waits and retries', async () => {
    live.proxy.inject(
      [
        {
          kind: 'status',
          status: 409,
          headers: { 'retry-after': '0' },
          body: errorBody('idempotency_in_progress', 'x'),
        },
      ],
      TX,
    );
    const res = await live.client().transmissions.send(MAIL);
    expect(res.transmission_id).toBeTruthy();
    expect(live.proxy.attempts(TX)).toHaveLength(2);
  });

  it('uses exponential backoff with full jitter: attempt n waits at most base * 2^(n-1), capped', async () => {
    live.proxy.inject([tx502(1), tx502(2), tx502(3)]);
    const delays: number[] = [];
    await live.client({ backoff: { baseMs: 20, maxMs: 50 }, onRetry: (r) => delays.push(r.delayMs) }).events.list();
    expect(delays).toHaveLength(3);
    const caps = [20, 40, 50];
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(caps[i] as number);
    });
  });

  it('a cancelled call stops at once and is not retried', async () => {
    live.proxy.inject([{ kind: 'delay', ms: 1000 }]);
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('cancelled by caller')), 100);
    await expect(live.client().events.list({}, { signal: ac.signal })).rejects.toThrow('cancelled by caller');
    expect(live.proxy.attempts('/v1/events')).toHaveLength(1);
  });
});

describe('DELETE after an uncertain attempt', () => {
  it('a 404 on the retry means the first attempt deleted it: the call succeeds', async () => {
    const client = live.client();
    const hook = await client.webhooks.create({ url: 'http://127.0.0.1:9/hook' });
    const path = `/v1/webhooks/${hook.id}`;
    live.proxy.inject([{ kind: 'drop-after' }], path);
    await expect(client.webhooks.delete(hook.id)).resolves.toBeUndefined();
    expect(live.proxy.attempts(path, 'DELETE').map((a) => a.upstreamStatus)).toEqual([204, 404]);
    await expect(client.webhooks.delete(hook.id)).rejects.toMatchObject({ status: 404 });
  });
});
