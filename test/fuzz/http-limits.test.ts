/**
 * Oversized, slow and malformed HTTP requests over real sockets:
 * - a body over the limit (declared, chunked, or a multipart import) answers 413
 *   payload_too_large and the connection is closed long before the client has sent it all;
 * - headers or a body trickled a byte at a time are cut off with 408 (POSTYARD_HTTP_*_TIMEOUT_SECONDS)
 *   while other clients are served, and a slow handler is not cut by those timeouts;
 * - whatever bytes a client sends as a request, the answer (if any) is a 4xx with the
 *   contract's error body, never a 5xx, and the server keeps serving.
 * No timing assertions: "cut off" means the server closed the connection; the give-up times
 * are only a safety net.
 */
import http from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from './harness.ts';
import { expectContractError, parseResponse, rawExchange } from './raw-http.ts';

const MB = 1024 * 1024;

async function listen(env: Record<string, string>): Promise<{ ctx: TestContext; tenant: TestTenant; port: number }> {
  const ctx = await createTestContext({ env });
  const tenant = await createTenant(ctx);
  const url = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
  return { ctx, tenant, port: Number(new URL(url).port) };
}

/** A normal request on its own connection (keep-alive off), answered in full. */
function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

describe('bodies over the limit', () => {
  let s: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    s = await listen({ POSTYARD_BODY_LIMIT_MB: '1', POSTYARD_IMPORT_LIMIT_MB: '1' });
  });
  afterAll(async () => {
    await s?.ctx.close();
  });
  const auth = () => `Authorization: Bearer ${s.tenant.apiKey}\r\n`;
  const total = 64 * MB;
  const chunk = Buffer.alloc(64 * 1024, 'x');

  it('declared Content-Length over the limit: 413 at once, connection closed, the rest never read', async () => {
    const head = `POST /v1/transmissions HTTP/1.1\r\nHost: t\r\n${auth()}Content-Type: application/json\r\nContent-Length: ${total}\r\n\r\n`;
    const r = await rawExchange(s.port, head, { repeat: chunk, maxBytes: total });
    expectContractError(parseResponse(r.response), 413, 'payload_too_large');
    expect(r.closedByServer).toBe(true);
    expect(r.written).toBeLessThan(total);
  });

  it('chunked body growing past the limit: 413, connection closed', async () => {
    const head = `POST /v1/webhooks HTTP/1.1\r\nHost: t\r\n${auth()}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const piece = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    const r = await rawExchange(s.port, head, { repeat: piece, maxBytes: total });
    expectContractError(parseResponse(r.response), 413, 'payload_too_large');
    expect(r.closedByServer).toBe(true);
    expect(r.written).toBeLessThan(total);
  });

  it('multipart CSV import over the import limit: 413, connection closed', async () => {
    const part =
      '--B\r\nContent-Disposition: form-data; name="file"; filename="s.csv"\r\nContent-Type: text/csv\r\n\r\nidentifier\n';
    const head = `POST /v1/suppressions HTTP/1.1\r\nHost: t\r\n${auth()}Content-Type: multipart/form-data; boundary=B\r\nContent-Length: ${total}\r\n\r\n${part}`;
    const rows = Buffer.from('someone@example.com\n'.repeat(3000));
    const r = await rawExchange(s.port, head, { repeat: rows, maxBytes: total });
    expectContractError(parseResponse(r.response), 413, 'payload_too_large');
    expect(r.closedByServer).toBe(true);
    expect(r.written).toBeLessThan(total);
  });

  it('the server still answers afterwards', async () => {
    expect(await get(s.port, '/healthz')).toBe(200);
  });
});

describe('slow clients', () => {
  it('the timeouts are configurable, with documented defaults, and checked at start-up', () => {
    const d = loadConfig({});
    expect([d.httpHeadersTimeoutSeconds, d.httpRequestTimeoutSeconds, d.httpKeepAliveTimeoutSeconds]).toEqual([
      30, 300, 72,
    ]);
    const bad = () =>
      loadConfig({ POSTYARD_HTTP_HEADERS_TIMEOUT_SECONDS: '60', POSTYARD_HTTP_REQUEST_TIMEOUT_SECONDS: '30' });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/^POSTYARD_HTTP_REQUEST_TIMEOUT_SECONDS: /);
  });

  let s: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    s = await listen({ POSTYARD_HTTP_HEADERS_TIMEOUT_SECONDS: '1', POSTYARD_HTTP_REQUEST_TIMEOUT_SECONDS: '2' });
  });
  afterAll(async () => {
    await s?.ctx.close();
  });

  it('headers trickled a byte at a time, or a body that stalls: 408 invalid_request and cut; others are served', async () => {
    const headers = rawExchange(s.port, 'GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ', {
      repeat: 'a',
      everyMs: 100,
      giveUpMs: 20_000,
    });
    const body = rawExchange(
      s.port,
      `POST /v1/transmissions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${s.tenant.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"recipients":`,
      { repeat: ' ', everyMs: 100, giveUpMs: 20_000 },
    );
    const stalled = rawExchange(
      s.port,
      `POST /v1/webhooks HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${s.tenant.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{`,
      { giveUpMs: 20_000 },
    );
    const silent = rawExchange(s.port, '', { giveUpMs: 20_000 });
    // While they drip, a normal client is served.
    expect(await get(s.port, '/healthz')).toBe(200);
    for (const r of await Promise.all([headers, body, stalled])) {
      expect(r.closedByServer).toBe(true);
      expectContractError(parseResponse(r.response), 408, 'invalid_request');
    }
    const quiet = await silent;
    expect(quiet.closedByServer).toBe(true);
    expect(await get(s.port, '/healthz')).toBe(200);
  });

  it('a handler slower than the request timeout is not cut (the timeout counts receiving only)', async () => {
    const receiver = http.createServer((_req, res) => {
      setTimeout(() => res.end('ok'), 3500).unref();
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const port = (receiver.address() as { port: number }).port;
      const created = await s.ctx.app.inject({
        method: 'POST',
        url: '/v1/webhooks',
        headers: { authorization: `Bearer ${s.tenant.apiKey}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ url: `http://127.0.0.1:${port}/slow`, events: ['*'] }),
      });
      expect(created.statusCode).toBe(201);
      const id = (created.json() as { id: string }).id;
      const head = `POST /v1/webhooks/${id}/test HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${s.tenant.apiKey}\r\nConnection: close\r\n\r\n`;
      const r = await rawExchange(s.port, head);
      const res = parseResponse(r.response);
      expect(res?.status, r.response).toBe(200);
      expect((JSON.parse(res?.body ?? '{}') as { delivered: boolean }).delivered).toBe(true);
    } finally {
      receiver.closeAllConnections();
      await new Promise((r) => receiver.close(r));
    }
  });
});

describe('malformed requests', () => {
  let s: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    s = await listen({});
  });
  afterAll(async () => {
    await s?.ctx.close();
  });

  const byte = fc.integer({ min: 0, max: 255 }).map((b) => String.fromCharCode(b));
  const junk = fc.string({ unit: byte, maxLength: 40 });
  const method = fc.oneof(fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'get', 'G\u0000T', ''), junk);
  const target = fc.oneof(
    fc.constantFrom('/healthz', '/v1/api-keys', '/v1/transmissions', '*', 'http://x/v1/events', '/v1/%zz', ''),
    junk.map((j) => `/v1/${j}`),
  );
  const version = fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'HTTP/1.1 x', '', 'http/1.1');
  const header = fc.oneof(
    fc.constantFrom(
      'Host: t',
      'Content-Length: 5',
      'Content-Length: -1',
      'Content-Length: abc',
      'Content-Length: 5\r\nContent-Length: 6',
      'Transfer-Encoding: chunked',
      'Transfer-Encoding: chunked\r\nContent-Length: 3',
      'Transfer-Encoding: gzip, chunked',
      'Content-Type: application/json',
      'Expect: 100-continue',
      'Connection: upgrade\r\nUpgrade: websocket',
      ` X-Folded: a`,
      'X: \u0000',
      `X-Big: ${'a'.repeat(20_000)}`,
    ),
    fc.tuple(junk, junk).map(([k, v]) => `${k}: ${v}`),
    junk,
  );
  const body = fc.oneof(fc.constantFrom('', '{}', '0\r\n\r\n', 'zz\r\nabc\r\n0\r\n\r\n', '5\r\nab'), junk);

  it(
    'any request bytes: a 4xx with the contract body (or 2xx), never a 5xx, never a hang',
    async () => {
      await fc.assert(
        fc.asyncProperty(method, target, version, fc.array(header, { maxLength: 4 }), body, async (m, t, v, hs, b) => {
          const auth = `Authorization: Bearer ${s.tenant.apiKey}`;
          const head = `${m} ${t} ${v}\r\n${[auth, ...hs].join('\r\n')}\r\n\r\n${b}`;
          const r = await rawExchange(s.port, Buffer.from(head, 'latin1'), { end: true, giveUpMs: 15_000 });
          expect(r.closedByServer, `no end to ${JSON.stringify(head.slice(0, 200))}`).toBe(true);
          const res = parseResponse(r.response);
          if (!res) return; // closed without an answer (e.g. an upgrade nobody accepted)
          expect(res.status, `${JSON.stringify(head.slice(0, 300))} -> ${r.response.slice(0, 300)}`).toBeLessThan(500);
          if (res.status >= 400 && m !== 'HEAD') {
            const parsed = JSON.parse(res.body) as { errors: { code: string; message: string }[] };
            expect(parsed.errors[0]?.code, res.body).toMatch(/^[a-z_]+$/);
            expect(res.headers['content-type']).toMatch(/^application\/json/);
          }
        }),
        fuzzParams(80),
      );
      expect(await get(s.port, '/healthz')).toBe(200);
    },
    FUZZ_TIMEOUT_MS,
  );
});
