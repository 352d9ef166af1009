/**
 * TransmissionCache (src/modules/delivery/transmission-cache.ts): the worker's parsed
 * transmissions. Fair claims serve tenants in turn, so with many tenants each transmission comes
 * back only after all the others: the cache must hold them across a whole turn (it held 500, and
 * reloaded every one on every turn), and bound its memory by bytes, not only by count. Both
 * backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessagesTable } from '../../src/db/schema.ts';
import { TransmissionCache } from '../../src/modules/delivery/transmission-cache.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let tenant: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  tenant = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

/**
 * Sends `n` transmissions of `recipients` recipients each; returns the first message of each, in
 * sending order.
 */
async function sendMany(n: number, text = 'plain', recipients = 2): Promise<MessagesTable[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: tenant.apiKey,
      body: {
        recipients: Array.from({ length: recipients }, (_, k) => ({ email: `r${i}-${k}@example.com` })),
        content: { subject: `s${i}`, text },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    ids.push(res.json().transmission_id as string);
  }
  const rows = await ctx.c.database.db
    .selectFrom('messages')
    .selectAll()
    .where('transmission_id', 'in', ids)
    .orderBy('id')
    .execute();
  const byTx = new Map<string, MessagesTable>();
  for (const r of rows) if (!byTx.has(r.transmission_id)) byTx.set(r.transmission_id, r);
  return ids.map((id) => byTx.get(id) as MessagesTable);
}

describe('TransmissionCache', () => {
  it('keeps 600 transmissions served in turn: the second turn loads none of them again', async () => {
    const messages = await sendMany(600);
    const cache = new TransmissionCache(() => ctx.c.database.db, null);
    const first = new Map<string, unknown>();
    // Claims of 32 transmissions, as a fair claim over 32 tenants takes them.
    for (let i = 0; i < messages.length; i += 32) await cache.prefetch(messages.slice(i, i + 32));
    for (const m of messages) first.set(m.transmission_id, await cache.of(m));
    for (let i = 0; i < messages.length; i += 32) await cache.prefetch(messages.slice(i, i + 32));
    for (const m of messages) expect(await cache.of(m)).toBe(first.get(m.transmission_id));
    expect(cache.stats().entries).toBe(600);
  });

  it('keeps its transmissions within the byte budget, dropping the least recently used', async () => {
    const messages = await sendMany(10, 'x'.repeat(300_000));
    const cache = new TransmissionCache(() => ctx.c.database.db, null, 1024 * 1024);
    const hot = await cache.of(messages[0] as MessagesTable);
    for (const m of messages.slice(1)) {
      await cache.of(m);
      // The first one is used after each other one: the most recently used is never dropped.
      expect(await cache.of(messages[0] as MessagesTable)).toBe(hot);
    }
    const { entries, bytes } = cache.stats();
    expect(bytes).toBeLessThanOrEqual(1024 * 1024);
    expect(bytes).toBeGreaterThan(600_000);
    expect(entries).toBeGreaterThan(1);
    expect(entries).toBeLessThan(10);
  });

  // Issue 31 item 8: in the PostgreSQL soak (one recipient per transmission) the cache held 4,096
  // transmissions (~10 MB) that nothing read again, promoted to V8's old generation and pushed
  // out by the next ones: the server's heap grew.
  it('keeps no one-recipient transmission, and still hands each claimed one to its message without a load of its own', async () => {
    const messages = await sendMany(300, 'plain', 1);
    let online = true;
    const cache = new TransmissionCache(() => {
      if (!online) throw new Error('of() loaded a transmission the prefetch had loaded');
      return ctx.c.database.db;
    }, null);
    for (let i = 0; i < messages.length; i += 50) {
      const claim = messages.slice(i, i + 50);
      online = true;
      await cache.prefetch(claim);
      expect(cache.stats().handedOver).toBe(claim.length);
      // Every message gets its transmission from the prefetch, without the database.
      online = false;
      for (const m of claim) expect((await cache.of(m))?.id).toBe(m.transmission_id);
    }
    online = true;
    expect(cache.stats()).toMatchObject({ entries: 0, handedOver: 0 });
    // Loaded on its own (a retry), a one-recipient transmission is not kept either.
    expect((await cache.of(messages[0] as MessagesTable))?.id).toBe(messages[0]?.transmission_id);
    expect(cache.stats()).toMatchObject({ entries: 0, handedOver: 0 });
  });
});
