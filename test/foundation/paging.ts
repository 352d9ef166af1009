/** Shared checks for cursor-paginated list endpoints (docs/api.md "Pagination"). */
import { expect } from 'vitest';
import { call, type TestContext } from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';

export interface Page {
  data: { id: string }[];
  next_cursor: string | null;
}

/** Follows next_cursor from the first page to the end; `between` runs after each page. */
export async function walkPages(
  ctx: TestContext,
  url: string,
  key: string,
  limit: number,
  between?: (pageIndex: number) => Promise<void>,
): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: Record<string, string> = { limit: String(limit), ...(cursor ? { cursor } : {}) };
    const res = await call(ctx.app, 'GET', url, { key, query });
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as Page;
    expect(page.data.length).toBeLessThanOrEqual(limit);
    if (page.next_cursor !== null) expect(page.data.length).toBe(limit);
    ids.push(...page.data.map((d) => d.id));
    cursor = page.next_cursor;
    pages++;
    if (between) await between(pages);
    if (pages > 1000) throw new Error('pagination does not end');
  } while (cursor);
  return { ids, pages };
}

/** limit 0, 1001, -1, abc -> 400 invalid_parameter naming `limit`; 1 and 1000 are fine. */
export async function checkLimitParameter(ctx: TestContext, url: string, key: string) {
  for (const limit of ['0', '1001', '-1', 'abc', '1.5', '99999999999999999999']) {
    const res = await call(ctx.app, 'GET', url, { key, query: { limit } });
    const body = expectError(res, 400, 'invalid_parameter');
    expect(body.errors[0] && (body.errors[0] as { field?: string }).field, `limit=${limit}`).toBe('limit');
  }
  for (const limit of ['1', '1000']) {
    const res = await call(ctx.app, 'GET', url, { key, query: { limit } });
    expect(res.statusCode, `limit=${limit}`).toBe(200);
  }
  const dflt = await call(ctx.app, 'GET', url, { key });
  expect(dflt.statusCode).toBe(200);
}

/** A tampered, truncated or foreign cursor -> 400 invalid_cursor. */
export async function checkTamperedCursor(ctx: TestContext, url: string, key: string, validCursor: string) {
  const [body = '', sig = ''] = validCursor.split('.');
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
  const forged = Buffer.from(JSON.stringify({ id: 'ffffffff-ffff-7fff-bfff-ffffffffffff' })).toString('base64url');
  const bad = [
    `${flip(body, 2)}.${sig}`,
    `${body}.${flip(sig, 0)}`,
    body,
    `${body}.`,
    `.${sig}`,
    `${forged}.${sig}`,
    'garbage',
    '%%%',
    `${validCursor}x`,
  ];
  for (const cursor of bad) {
    const res = await call(ctx.app, 'GET', url, { key, query: { cursor } });
    const b = expectError(res, 400, 'invalid_cursor');
    expect((b.errors[0] as { field?: string }).field, cursor).toBe('cursor');
  }
  const ok = await call(ctx.app, 'GET', url, { key, query: { cursor: validCursor } });
  expect(ok.statusCode).toBe(200);
}
