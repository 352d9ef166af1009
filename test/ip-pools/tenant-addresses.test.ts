/**
 * Source addresses are the operator's (issue 31 item 3, docs/ip-pools.md "For the operator"), seen
 * from outside: a real `postyard start` (every role, render threads on, as installed) sending to a
 * sink MX on loopback from 127.0.0.2-5; the operator dedicates with the real `postyard addresses`
 * command. The sink records the address each message came from.
 *
 * - A pool created a moment before a send is used at once (the node's routing table reloads when
 *   the routing generation moved): before, a message naming it left round robin over every
 *   configured address for up to 5 s.
 * - A message never leaves from an address dedicated to another tenant: not as a fallback, not
 *   from a pool made before the dedication, not on a retry that began there.
 * - Warmup is the owner's: a tenant's policy holds only its own mail on its dedicated address and
 *   counts only that; a tenant policy left on a shared address holds nobody's mail (before, a
 *   1-a-day policy held every other tenant's mail on that address until midnight).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/lib/ids.ts';
import { nodeEnv } from '../helpers/cluster.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';
import {
  freePort,
  killChildren,
  runCli,
  type ServerProcess,
  SPAWN_TEST_TIMEOUT_MS,
  startServer,
} from '../helpers/server-process.ts';

const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
let ctx: TestContext;
let destination: Destination;
let server: ServerProcess;
let env: Record<string, string>;
let a: TestTenant;
let b: TestTenant;
/** RCPTs the sink saw, with the address each came from; `retry*` recipients get one 451 first. */
const rcpts: { rcpt: string; from: string }[] = [];
const refusedOnce = new Set<string>();

beforeAll(async () => {
  destination = await startDestination({
    signing: testSigningKey(),
    sink: {
      script: ({ stage, rcpt, remoteAddress }) => {
        if (stage !== 'rcpt') return 'accept';
        rcpts.push({ rcpt, from: remoteAddress });
        if (rcpt.startsWith('retry') && !refusedOnce.has(rcpt)) {
          refusedOnce.add(rcpt);
          return { code: 451, message: '4.7.1 Greylisted, come back later' };
        }
        return 'accept';
      },
    },
  });
  ctx = await createTestContext({ env: { ...destination.env, POSTYARD_SOURCE_ADDRESSES: ADDRESSES.join(',') } });
  a = await createTenant(ctx, 'Shop <news@shop.test>');
  b = await createTenant(ctx, 'Shop <news@shop.test>');
  // No --roles: every role, as `npm start` runs; POSTYARD_RENDER_THREADS unset: threads on.
  env = nodeEnv(ctx, { POSTYARD_METRICS_PORT: String(await freePort()) });
  server = await startServer([], { env });
}, SPAWN_TEST_TIMEOUT_MS);
afterAll(async () => {
  await server?.stop();
  killChildren();
  await ctx?.close();
  await destination?.close();
});

async function api(t: TestTenant, method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${t.apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, text };
}

async function ok(t: TestTenant, method: string, path: string, body?: unknown) {
  const res = await api(t, method, path, body);
  expect(res.status, res.text).toBeLessThan(300);
  return res.json;
}

async function send(t: TestTenant, recipients: string[], options: Record<string, unknown> = {}): Promise<string> {
  const res = await ok(t, 'POST', '/v1/transmissions', {
    recipients: recipients.map((email) => ({ email })),
    content: { subject: 'Hi', text: 'Hello' },
    options,
  });
  return res.transmission_id as string;
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end)
      throw new Error(`timed out waiting for ${what}; server said: ${server.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The addresses the sink received `emails` from (one entry per delivered message). */
const fromOf = (emails: string[]) =>
  destination.sink.messages.filter((m) => emails.includes(m.rcptTo[0] ?? '')).map((m) => m.remoteAddress);
const delivered = (emails: string[]) =>
  until(`${emails.length} delivered`, () => fromOf(emails).length === emails.length);
const emails = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}@dest.test`);

async function rows(transmissionId: string) {
  return ctx.c.database.db
    .selectFrom('messages')
    .select(['recipient', 'state', 'source_address', 'attempt_count', 'next_attempt_at'])
    .where('transmission_id', '=', transmissionId)
    .execute();
}

async function cli(...args: string[]) {
  const r = await runCli(['addresses', ...args], { env });
  expect(r.code, r.stderr).toBe(0);
  return r;
}

describe('source addresses of the operator, through a running server', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('a pool created a moment before a send is used at once: by id, by name, as the default', async () => {
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    // The node loads its routing table for this message, so the pools below are new to it.
    const warm = ['fresh-warm@dest.test'];
    await send(t, warm);
    await delivered(warm);
    const fresh = await ok(t, 'POST', '/v1/ip-pools', { name: 'fresh', addresses: [{ address: '127.0.0.3' }] });
    const byId = emails('fresh-id-', 3);
    const byName = emails('fresh-name-', 3);
    await send(t, byId, { ip_pool: fresh.id });
    await send(t, byName, { ip_pool: 'fresh' });
    await ok(t, 'POST', '/v1/ip-pools', { name: 'home', default: true, addresses: [{ address: '127.0.0.4' }] });
    const byDefault = emails('fresh-default-', 3);
    await send(t, byDefault);
    await delivered([...byId, ...byName, ...byDefault]);
    expect({ byId: fromOf(byId), byName: fromOf(byName), byDefault: fromOf(byDefault) }).toEqual({
      byId: ['127.0.0.3', '127.0.0.3', '127.0.0.3'],
      byName: ['127.0.0.3', '127.0.0.3', '127.0.0.3'],
      byDefault: ['127.0.0.4', '127.0.0.4', '127.0.0.4'],
    });
  });

  it("a tenant's mail never leaves from an address dedicated to another tenant", async () => {
    // Before the dedication: B pools 127.0.0.5 and has a message deferred on it.
    const bAll = await ok(b, 'POST', '/v1/ip-pools', {
      name: 'b-all',
      addresses: [{ address: '127.0.0.4' }, { address: '127.0.0.5' }],
    });
    await ok(b, 'POST', '/v1/ip-pools', { name: 'b-five', addresses: [{ address: '127.0.0.5' }] });
    const retried = await send(b, ['retry-b@dest.test'], { ip_pool: 'b-five' });
    await until('deferred on 127.0.0.5', async () => (await rows(retried))[0]?.state === 'deferred');
    expect((await rows(retried))[0]?.source_address).toBe('127.0.0.5');

    const dedicated = await cli('dedicate', '--address', '127.0.0.5', '--tenant', a.tenantId, '--json');
    expect(JSON.parse(dedicated.stdout)).toMatchObject({
      address: '127.0.0.5',
      status: 'dedicated',
      tenant_id: a.tenantId,
      skipped_in_pools: 2,
    });
    // B's pool says so, and B cannot put the address back.
    const pool = await ok(b, 'GET', `/v1/ip-pools/${bAll.id}`);
    expect(pool.addresses).toEqual([
      { address: '127.0.0.4', weight: 1, warmup_policy_id: null, flags: [] },
      { address: '127.0.0.5', weight: 1, warmup_policy_id: null, flags: ['dedicated_to_another_tenant'] },
    ]);
    const refused = await api(b, 'PATCH', `/v1/ip-pools/${bAll.id}`, {
      addresses: [{ address: '127.0.0.4' }, { address: '127.0.0.5' }],
    });
    expect(refused.status).toBe(422);
    expect(refused.json.errors).toEqual([
      {
        code: 'validation_failed',
        field: 'addresses[1].address',
        message: '127.0.0.5 is dedicated to another tenant',
      },
    ]);

    // B's mail: outside every pool (the shared addresses), through its old pool, and the retry.
    const loose = emails('b-loose-', 9);
    const pooled = emails('b-pooled-', 6);
    await send(b, loose);
    await send(b, pooled, { ip_pool: bAll.id });
    await ctx.c.database.db
      .updateTable('messages')
      .set({ next_attempt_at: new Date(Date.now() - 1000).toISOString() })
      .where('transmission_id', '=', retried)
      .execute();
    await delivered([...loose, ...pooled, 'retry-b@dest.test']);
    expect(new Set(fromOf(loose))).toEqual(new Set(['127.0.0.2', '127.0.0.3', '127.0.0.4']));
    expect(fromOf(pooled)).toEqual(Array(6).fill('127.0.0.4'));
    const retry = rcpts.filter((r) => r.rcpt === 'retry-b@dest.test').map((r) => r.from);
    expect(retry).toHaveLength(2);
    expect(retry[0]).toBe('127.0.0.5');
    expect(['127.0.0.2', '127.0.0.3', '127.0.0.4']).toContain(retry[1]);

    // A's mail leaves from its address only through its own pools.
    await ok(a, 'POST', '/v1/ip-pools', { name: 'a-five', addresses: [{ address: '127.0.0.5' }] });
    const aLoose = emails('a-loose-', 3);
    const aPooled = emails('a-pooled-', 3);
    await send(a, aLoose);
    await send(a, aPooled, { ip_pool: 'a-five' });
    await delivered([...aLoose, ...aPooled]);
    expect(fromOf(aLoose)).not.toContain('127.0.0.5');
    expect(fromOf(aPooled)).toEqual(Array(3).fill('127.0.0.5'));
    // B never left from 127.0.0.5 after the dedication.
    const bAfter = rcpts.filter((r) => r.rcpt.startsWith('b-'));
    expect(bAfter.filter((r) => r.from === '127.0.0.5')).toEqual([]);
  });

  it("warmup of a dedicated address is its tenant's: it caps only that tenant's mail and counts only it", async () => {
    const policy = await ok(a, 'POST', '/v1/warmup-policies', {
      stages: [{ day: 1, daily_limit: 2 }],
      max_bounce_rate: 0.1,
      max_complaint_rate: 0.01,
    });
    // 127.0.0.5 is dedicated to A (the test above).
    await ok(a, 'POST', '/v1/ip-pools', {
      name: 'a-warm',
      addresses: [{ address: '127.0.0.5', warmup_policy_id: policy.id }],
    });
    const aMail = emails('a-warm-', 5);
    const aId = await send(a, aMail, { ip_pool: 'a-warm' });
    const bMail = emails('b-warm-', 6);
    const bId = await send(b, bMail, { ip_pool: 'b-all' });
    await delivered(bMail);
    await until('two of A delivered, three waiting', async () => {
      const r = await rows(aId);
      return (
        r.filter((x) => x.state === 'delivered').length === 2 &&
        r.filter((x) => x.state === 'queued' && x.attempt_count === 0).length === 3
      );
    });
    expect(fromOf(aMail)).toEqual(['127.0.0.5', '127.0.0.5']);
    expect(fromOf(bMail)).toEqual(Array(6).fill('127.0.0.4'));
    await until('B recorded delivered at the first attempt', async () =>
      (await rows(bId)).every((x) => x.state === 'delivered' && x.attempt_count === 1),
    );
    const nextMidnight = Math.floor(Date.now() / 86_400_000) * 86_400_000 + 86_400_000;
    for (const w of (await rows(aId)).filter((x) => x.state === 'queued'))
      expect(Date.parse(w.next_attempt_at)).toBeGreaterThanOrEqual(nextMidnight);
    const counted = await ctx.c.database.db
      .selectFrom('warmup_counters')
      .select(['address', 'sent'])
      .where('period', 'like', 'd:%')
      .execute();
    expect(counted.map((c) => ({ address: c.address, sent: Number(c.sent) }))).toEqual([
      { address: '127.0.0.5', sent: 2 },
    ]);
  });

  it("a tenant's warmup policy left on a shared address holds no other tenant's mail", async () => {
    // As a database from before this release can hold it (or after `addresses share`): A's pool
    // attaches its 1-a-day policy to the shared 127.0.0.3.
    const t = await createTenant(ctx, 'Shop <news@shop.test>');
    const policy = await ok(t, 'POST', '/v1/warmup-policies', {
      stages: [{ day: 1, daily_limit: 1 }],
      max_bounce_rate: 0.1,
      max_complaint_rate: 0.01,
    });
    const poolId = newId();
    const now = new Date().toISOString();
    await ctx.c.database.db
      .insertInto('ip_pools')
      .values({
        tenant_id: t.tenantId,
        id: poolId,
        name: 'legacy',
        overflow_pool_id: null,
        is_default: 0,
        mail_types: '[]',
        created_at: now,
        updated_at: now,
      })
      .execute();
    await ctx.c.database.db
      .insertInto('ip_pool_addresses')
      .values({
        tenant_id: t.tenantId,
        pool_id: poolId,
        address: '127.0.0.3',
        weight: 1,
        warmup_policy_id: policy.id,
        position: 0,
      })
      .execute();
    const other = await createTenant(ctx, 'Shop <news@shop.test>');
    await ok(other, 'POST', '/v1/ip-pools', { name: 'three', addresses: [{ address: '127.0.0.3' }] });
    const mine = emails('legacy-own-', 2);
    await send(t, mine, { ip_pool: poolId });
    const theirs = emails('legacy-other-', 4);
    const theirId = await send(other, theirs, { ip_pool: 'three' });
    await delivered([...mine, ...theirs]);
    expect(fromOf(theirs)).toEqual(Array(4).fill('127.0.0.3'));
    await until('recorded delivered at the first attempt', async () =>
      (await rows(theirId)).every((x) => x.state === 'delivered' && x.attempt_count === 1),
    );
    const pool = await ok(t, 'GET', `/v1/ip-pools/${poolId}`);
    expect(pool.addresses[0].flags).toEqual(['warmup_policy_ignored']);
  });
});
