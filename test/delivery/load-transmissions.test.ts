/**
 * loadTransmissions (src/modules/delivery/queue.repo.ts): the worker's batch load of a claim's
 * transmissions must return exactly what loadTransmission returns one by one (link tables of
 * click-tracked ones included), and nothing across tenants. Both backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTransmission, loadTransmissions } from '../../src/modules/delivery/queue.repo.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  a = await createTenant(ctx);
  b = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

async function send(t: TestTenant, i: number, clickTracking: boolean): Promise<string> {
  const links = Array.from({ length: 1 + (i % 4) }, (_, k) => `<a href="https://shop.example/p/${i}/${k}">p${k}</a>`);
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email: `r${i}@example.com` }],
      content: { subject: `s${i}`, html: `<p>${links.join(' ')}</p>`, text: 'plain' },
      options: { click_tracking: clickTracking },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  return res.json().transmission_id as string;
}

describe('loadTransmissions', () => {
  it('returns what loadTransmission returns, for 250 transmissions (more than one chunk), tracked or not', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 250; i++) ids.push(await send(a, i, i % 3 !== 0));
    const refs = [...ids, ...ids.slice(0, 10)].map((id) => ({ tenant_id: a.tenantId, transmission_id: id }));
    const batch = await loadTransmissions(ctx.c.database.db, refs);
    expect(batch.size).toBe(250);
    let tracked = 0;
    for (const id of ids) {
      const one = await loadTransmission(ctx.c.database.db, a.tenantId, id);
      expect(batch.get(id)).toEqual(one);
      if (one?.tracking_links) {
        tracked++;
        expect(one.tracking_links.length).toBeGreaterThan(0);
      }
    }
    expect(tracked).toBe(166);
  });

  it("never returns another tenant's transmission", async () => {
    const own = await send(b, 1, true);
    const foreign = await send(a, 2, true);
    const batch = await loadTransmissions(ctx.c.database.db, [
      { tenant_id: b.tenantId, transmission_id: own },
      { tenant_id: b.tenantId, transmission_id: foreign },
    ]);
    expect([...batch.keys()]).toEqual([own]);
    expect(batch.get(own)?.tenant_id).toBe(b.tenantId);
  });
});
