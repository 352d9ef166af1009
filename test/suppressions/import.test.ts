/** POST /v1/suppressions with multipart/form-data: the streamed CSV import (docs/api.md "POST /v1/suppressions"). */
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';
import { csvUpload, multipartBody } from './multipart.ts';

interface ImportAnswer {
  imported: number;
  skipped: number;
  errors: { line: number; message: string }[];
}

let ctx: TestContext;
/** A second app on the same database with a 1 MB import limit. */
let small: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
  small = await createTestContext({ shareWith: ctx, env: { POSTYARD_IMPORT_LIMIT_MB: '1' } });
});
afterAll(async () => {
  await small?.close();
  await ctx?.close();
});

function upload(
  t: TestTenant,
  csv: string | Buffer,
  opts: { app?: TestContext; headers?: Record<string, string> } = {},
) {
  const { payload, contentType } = csvUpload(csv);
  return (opts.app ?? ctx).app.inject({
    method: 'POST',
    url: '/v1/suppressions',
    headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType, ...(opts.headers ?? {}) },
    payload,
  });
}

async function list(t: TestTenant, query: Record<string, string> = {}) {
  const res = await call(ctx.app, 'GET', '/v1/suppressions', { key: t.apiKey, query: { limit: '1000', ...query } });
  expect(res.statusCode, res.body).toBe(200);
  return (
    res.json() as {
      data: { identifier: string; type: string; reason_category: string; description: string | null; source: string }[];
    }
  ).data;
}

describe('CSV import', () => {
  it('imports good rows and reports bad ones by physical line (header = line 1)', async () => {
    const t = await createTenant(ctx);
    const csv = [
      'identifier,type,reason_category,description', // 1
      'ann@example.com,email,hard_bounce,', // 2
      '', // 3 (blank: ignored)
      'Bob@Example.COM', // 4 (defaults: email, manual)
      'not-an-address,email,manual,', // 5
      'example.org,domain,complaint,whole domain', // 6
      'carl@example.com,fax,manual,', // 7
      'dora@example.com,email,sorry,', // 8
      'bad domain.com,domain,,', // 9
      'eve@example.com,email,manual,ok,extra', // 10
      ',email,manual,no identifier', // 11
      'fred@example.com,EMAIL,Unsubscribe,', // 12 (values are case-insensitive)
      '"gina@example.com"x,email,manual,', // 13 (malformed quoting)
      'hank@example.com,email,manual,"unterminated', // 14..15
      'ivan@example.com', // 15 (swallowed by the open quote)
    ].join('\n');
    const res = await upload(t, `${csv}\n`);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as ImportAnswer;
    expect(body.imported).toBe(4);
    expect(body.skipped).toBe(8);
    expect(body.errors.map((e) => e.line)).toEqual([5, 7, 8, 9, 10, 11, 13, 14]);
    const byLine = new Map(body.errors.map((e) => [e.line, e.message]));
    expect(byLine.get(5)).toMatch(/not-an-address.*not a valid email/);
    expect(byLine.get(7)).toMatch(/type must be one of email, domain/);
    expect(byLine.get(8)).toMatch(/reason_category must be one of/);
    expect(byLine.get(9)).toMatch(/not a valid domain/);
    expect(byLine.get(10)).toMatch(/Too many fields/);
    expect(byLine.get(11)).toMatch(/identifier is required/);
    expect(byLine.get(13)).toMatch(/quot/i);
    expect(byLine.get(14)).toMatch(/not terminated.*14-15/);

    const rows = await list(t);
    expect(rows.map((r) => `${r.type}:${r.identifier}:${r.reason_category}:${r.source}`).sort()).toEqual([
      'domain:example.org:complaint:import',
      'email:ann@example.com:hard_bounce:import',
      'email:bob@example.com:manual:import',
      'email:fred@example.com:unsubscribe:import',
    ]);
  });

  it('handles quoted fields with commas, escaped quotes, line breaks, CRLF, a BOM and any column order', async () => {
    const t = await createTenant(ctx);
    const csv =
      '\uFEFFType,Identifier,Description\r\n' + // 1
      'email,"quoted@example.com","Unsubscribed, via ""footer"" link"\r\n' + // 2
      'email,multi@example.com,"first line\r\nsecond line"\r\n' + // 3-4
      'email,"broken\r\n' + // 5 ... (opens a quote: only this record is lost)
      'still broken",x\r\n' + // 6
      '  domain  ,  Spaced.Example.NET  ,\r\n' + // 7
      'email,after@example.com'; // 8 (no final line break)
    const res = await upload(t, csv);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as ImportAnswer;
    expect(body.errors).toEqual([{ line: 5, message: expect.stringMatching(/not a valid email/) }]);
    expect(body.imported).toBe(4);
    const rows = await list(t);
    const by = new Map(rows.map((r) => [r.identifier, r]));
    expect(by.get('quoted@example.com')?.description).toBe('Unsubscribed, via "footer" link');
    expect(by.get('multi@example.com')?.description).toBe('first line\r\nsecond line');
    expect(by.get('spaced.example.net')?.type).toBe('domain');
    expect(by.get('after@example.com')?.reason_category).toBe('manual');
  });

  it('upserts: a repeated import updates the rows; the last occurrence in a file wins', async () => {
    const t = await createTenant(ctx);
    await upload(t, 'identifier,reason_category\nrep@example.com,manual\nrep@example.com,complaint\n');
    let rows = await list(t);
    expect(rows).toHaveLength(1);
    expect(rows[0]?.reason_category).toBe('complaint');
    const res = await upload(t, 'identifier,reason_category\nREP@example.com,manual\nrep@EXAMPLE.com,invalid\n');
    expect((res.json() as ImportAnswer).imported).toBe(2);
    rows = await list(t);
    // Addresses are case-insensitive (issue 13): REP@ and rep@EXAMPLE are the same row; the last wins.
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ identifier: 'rep@example.com', reason_category: 'invalid' });
  });

  it('reports only the first 100 errors but counts every skipped row', async () => {
    const t = await createTenant(ctx);
    const lines = ['identifier'];
    for (let i = 0; i < 150; i++) lines.push(`bad-${i}`, `good${i}@example.com`);
    const res = await upload(t, lines.join('\n'));
    const body = res.json() as ImportAnswer;
    expect(body).toMatchObject({ imported: 150, skipped: 150 });
    expect(body.errors).toHaveLength(100);
    expect(body.errors[0]?.line).toBe(2);
    expect(body.errors[99]?.line).toBe(200);
  });

  it('imports many rows across several batches', async () => {
    const t = await createTenant(ctx);
    const rows = ['identifier,type,reason_category'];
    for (let i = 0; i < 12_345; i++) rows.push(`u${i}@batch.example.com,email,hard_bounce`);
    const res = await upload(t, rows.join('\n'));
    expect(res.json()).toEqual({ imported: 12_345, skipped: 0, errors: [] });
    const counted = await ctx.c.database.db
      .selectFrom('suppressions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', t.tenantId)
      .executeTakeFirstOrThrow();
    expect(Number(counted.n)).toBe(12_345);
  });

  it('stops at the row limit and says where (service level, small limit)', async () => {
    const t = await createTenant(ctx);
    async function* chunks() {
      yield 'identifier\n';
      for (let i = 0; i < 10; i++) yield `limit${i}@example.com\n`;
    }
    const res = await ctx.c.suppressions.importCsv(t.tenantId, chunks(), { maxRows: 5 });
    expect(res.imported).toBe(5);
    expect(res.errors).toEqual([{ line: 7, message: expect.stringMatching(/Row limit reached.*5 rows/) }]);
    expect(await list(t)).toHaveLength(5);
  });
});

describe('CSV import: refused uploads', () => {
  it('422 when the file part is missing or has another name, or the header is unusable; nothing is written', async () => {
    const t = await createTenant(ctx);
    const noFile = multipartBody([{ name: 'note', content: 'hello' }]);
    const cases = [
      noFile,
      multipartBody([]),
      csvUpload('identifier\na@example.com\n', 'upload'),
      csvUpload('email,type\na@example.com,email\n'),
      csvUpload('identifier,colour\na@example.com,red\n'),
      csvUpload('identifier,identifier\na@example.com,b@example.com\n'),
      csvUpload(''),
      csvUpload('\n\n'),
    ];
    for (const { payload, contentType } of cases) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/v1/suppressions',
        headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType },
        payload,
      });
      const body = expectError(res, 422, 'validation_failed');
      expect((body.errors[0] as { field?: string }).field).toBe('file');
    }
    expect(await list(t)).toHaveLength(0);
  });

  it('answers a broken multipart body with a 4xx, never a 500', async () => {
    const t = await createTenant(ctx);
    const send = (contentType: string, payload: string | Buffer) =>
      ctx.app.inject({
        method: 'POST',
        url: '/v1/suppressions',
        headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType },
        payload,
      });
    // No boundary parameter.
    expectError(await send('multipart/form-data', 'whatever'), 422, 'validation_failed');
    // Cut off in the middle of the file part.
    const { payload, contentType } = csvUpload('identifier\na@example.com\nb@example.com\n');
    const cut = await send(contentType, payload.subarray(0, payload.length - 30));
    expect(cut.statusCode).toBeGreaterThanOrEqual(400);
    expect(cut.statusCode).toBeLessThan(500);
    // More parts than the multipart limits allow.
    const fields = Array.from({ length: 25 }, (_, i) => ({ name: `f${i}`, content: 'x' }));
    const many = multipartBody([
      ...fields,
      { name: 'file', filename: 'a.csv', content: 'identifier\nx@example.com\n' },
    ]);
    const res = await send(many.contentType, many.payload);
    expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
    expect(res.statusCode, res.body).toBeLessThan(500);
    expect(await list(t)).toHaveLength(0);
  });

  it('400 when an Idempotency-Key comes with a multipart import', async () => {
    const t = await createTenant(ctx);
    const res = await upload(t, 'identifier\na@example.com\n', { headers: { 'idempotency-key': 'imp-1' } });
    const body = expectError(res, 400, 'invalid_idempotency_key');
    expect(body.errors[0]?.message).toMatch(/not supported for multipart/);
    expect(await list(t)).toHaveLength(0);
  });

  it('403 without the scope, before the upload is read', async () => {
    const t = await createTenant(ctx);
    const key = await keyWithScopes(ctx, t.tenantId, ['read:events']);
    const res = await upload({ ...t, apiKey: key }, 'identifier\na@example.com\n');
    expectError(res, 403, 'insufficient_scope');
  });

  it('413 for a file over the import limit (declared length)', async () => {
    const t = await createTenant(ctx);
    const big = `identifier\n${'x'.repeat(2 * 1024 * 1024)}\n`;
    const res = await upload(t, big, { app: small });
    expectError(res, 413, 'payload_too_large');
  });

  it('413 for a file over the import limit sent without Content-Length (truncated by the parser)', async () => {
    const t = await createTenant(ctx);
    const rows = ['identifier'];
    for (let i = 0; i < 60_000; i++) rows.push(`stream${i}@example.com`);
    const { payload, contentType } = csvUpload(rows.join('\n')); // ~1.4 MB
    expect(payload.length).toBeGreaterThan(1024 * 1024 + 64 * 1024);
    const res = await small.app.inject({
      method: 'POST',
      url: '/v1/suppressions',
      headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType },
      payload: Readable.from([payload.subarray(0, 500_000), payload.subarray(500_000)]),
    });
    expectError(res, 413, 'payload_too_large');
    // This went through the streaming path (no Content-Length to refuse up front): batches before
    // the limit were committed (an import is an upsert, safe to repeat); nothing past it ever is.
    expect(await list(t, { identifier: 'stream0@example.com' })).toHaveLength(1);
    expect(await list(t, { identifier: 'stream59999@example.com' })).toHaveLength(0);
  });
});

describe('CSV import over a real HTTP connection', () => {
  it('streams an upload and answers; a refused upload does not hang the connection', async () => {
    const t = await createTenant(ctx);
    const node = await createTestContext({ shareWith: ctx });
    const app = node.app;
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const port = (app.server.address() as AddressInfo).port;
      const send = async (csv: string) => {
        const { payload, contentType } = csvUpload(csv);
        async function* body() {
          for (let i = 0; i < payload.length; i += 7000) yield payload.subarray(i, i + 7000);
        }
        const res = await request(`http://127.0.0.1:${port}/v1/suppressions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': contentType },
          body: Readable.from(body()),
        });
        return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
      };
      const rows = ['identifier,type'];
      for (let i = 0; i < 5000; i++) rows.push(`h${i}@http.example.com,email`);
      const ok = await send(rows.join('\n'));
      expect(ok).toEqual({ status: 200, body: { imported: 5000, skipped: 0, errors: [] } });
      const refused = await send(`nope,type\n${rows.slice(1).join('\n')}`);
      expect(refused.status).toBe(422);
      const again = await send('identifier\nlast@http.example.com\n');
      expect(again.body).toEqual({ imported: 1, skipped: 0, errors: [] });
    } finally {
      await node.close();
    }
  });
});
