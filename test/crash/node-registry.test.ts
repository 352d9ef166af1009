/**
 * The node table (src/jobs/node-registry.ts) in one process, on the test database: which earlier
 * runs a starting node releases at once, and how a silent run's claims are taken over.
 * test/crash/restart-recovery.test.ts shows the same with real processes killed by SIGKILL.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeMembership } from '../../src/jobs/node-registry.ts';
import { releaseClaimsOf } from '../../src/release-claims.ts';
import { isoAt } from '../../src/lib/clock.ts';
import { nodeSelf } from '../../src/lib/node-identity.ts';
import { createLogger } from '../../src/logger.ts';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { sleep, until } from '../helpers/cluster.ts';

describe(`node table: releasing the claims of dead runs (${DIALECT})`, () => {
  let ctx: TestContext;
  let t: TestTenant;
  const logger = createLogger('silent');
  const memberships: NodeMembership[] = [];
  const sleeper = spawn('sleep', ['600'], { stdio: 'ignore' });

  beforeAll(async () => {
    ctx = await createTestContext();
    t = await createTenant(ctx);
  });
  afterAll(async () => {
    for (const m of memberships) await m.leave();
    sleeper.kill('SIGKILL');
    await ctx?.close();
  });

  const db = () => ctx.c.database.db;

  /** A pid that no process has: a child that has exited and been reaped. */
  async function deadPid(): Promise<number> {
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(child, 'exit');
    return child.pid as number;
  }

  /** A run of some node, as a killed process leaves it: its row, a message and a key it claimed. */
  async function deadRun(name: string, row: { nodeId: string; host: string; pid: number }) {
    const holder = `${row.nodeId}:${row.pid}:${name}`;
    const at = isoAt(Date.now());
    await db()
      .insertInto('nodes')
      .values({ id: holder, node_id: row.nodeId, host: row.host, pid: row.pid, started_at: at, heartbeat_at: at })
      .execute();
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: `${name}@example.com` }], content: { subject: name, text: 'claimed' } },
    });
    expect(res.statusCode, res.body).toBe(202);
    const until5min = isoAt(Date.now() + 300_000);
    await db()
      .updateTable('messages')
      .set({ state: 'sending', locked_by: holder, locked_until: until5min, next_attempt_at: until5min })
      .where('transmission_id', '=', res.json().transmission_id)
      .execute();
    await db()
      .insertInto('idempotency_keys')
      .values({
        tenant_id: t.tenantId,
        scope: 'POST /v1/transmissions',
        key: `key-of-${name}`,
        fingerprint: 'f',
        state: 'in_progress',
        response_status: null,
        response_body: null,
        locked_until: isoAt(Date.now() + 60_000),
        locked_by: holder,
        created_at: at,
        expires_at: isoAt(Date.now() + 3600_000),
      })
      .execute();
    return holder;
  }

  /** What `holder` still holds: messages in sending, unexpired key claims, its node row. */
  async function holds(holder: string) {
    const messages = await db().selectFrom('messages').select('state').where('locked_by', '=', holder).execute();
    const keys = await db()
      .selectFrom('idempotency_keys')
      .select('key')
      .where('locked_by', '=', holder)
      .where('locked_until', '>', isoAt(Date.now()))
      .execute();
    const row = await db().selectFrom('nodes').select('id').where('id', '=', holder).executeTakeFirst();
    return { messages: messages.length, keys: keys.length, row: row !== undefined };
  }

  async function join(nodeId: string, heartbeatMs = 60_000, timeoutMs = 120_000) {
    const m = new NodeMembership({
      database: ctx.c.database,
      releaseClaims: releaseClaimsOf,
      self: nodeSelf(nodeId),
      logger,
      heartbeatMs,
      timeoutMs,
    });
    memberships.push(m);
    await m.join();
    return m;
  }

  it('a starting node releases its own earlier runs at once, but not a live process sharing its id', async () => {
    const host = hostname();
    const killed = await deadRun('killed', { nodeId: 'node-a', host, pid: await deadPid() });
    const moved = await deadRun('moved', { nodeId: 'node-a', host: 'another-host', pid: 1 });
    const sharing = await deadRun('sharing', { nodeId: 'node-a', host, pid: sleeper.pid as number });
    const other = await deadRun('other', { nodeId: 'node-b', host: 'another-host', pid: 1 });
    await join('node-a');
    expect(await holds(killed)).toEqual({ messages: 0, keys: 0, row: false });
    expect(await holds(moved)).toEqual({ messages: 0, keys: 0, row: false });
    expect(await holds(sharing)).toEqual({ messages: 1, keys: 1, row: true });
    expect(await holds(other)).toEqual({ messages: 1, keys: 1, row: true });
    // Released messages are due now, in their state before the claim (no attempt was counted).
    const released = await db()
      .selectFrom('messages')
      .select(['state', 'locked_until', 'next_attempt_at'])
      .where('recipient', '=', 'killed@example.com')
      .executeTakeFirstOrThrow();
    expect(released.state).toBe('queued');
    expect(released.locked_until).toBeNull();
    expect(released.next_attempt_at <= isoAt(Date.now())).toBe(true);
    await db().deleteFrom('nodes').where('id', 'in', [sharing, other]).execute();
  });

  it('on SQLite a starting node also releases any dead process of this host, whatever its id', async () => {
    const gone = await deadRun('gone', { nodeId: 'node-c', host: hostname(), pid: await deadPid() });
    await join('node-d');
    const left = await holds(gone);
    if (DIALECT === 'sqlite') expect(left).toEqual({ messages: 0, keys: 0, row: false });
    // PostgreSQL: nodes of other ids may run in other containers with the same host name and pid
    // space; only the heartbeat tells.
    else expect(left).toEqual({ messages: 1, keys: 1, row: true });
    await db().deleteFrom('nodes').where('id', '=', gone).execute();
  });

  it('a run whose heartbeat stops is taken over by a live node after the timeout, not before', async () => {
    const silent = await deadRun('silent', { nodeId: 'node-e', host: 'another-host', pid: 1 });
    const startedAt = Date.now();
    await join('node-f', 100, 1000);
    await sleep(500);
    expect(await holds(silent)).toEqual({ messages: 1, keys: 1, row: true });
    await until(
      async () => !(await holds(silent)).row,
      10_000,
      () => 'the silent run was never taken over',
      50,
    );
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1000);
    expect(await holds(silent)).toEqual({ messages: 0, keys: 0, row: false });
  });

  it('a live node keeps beating: another node never takes it over', async () => {
    const live = await join('node-g', 100, 1000);
    const watcher = await join('node-h', 100, 1000);
    await sleep(2500);
    const rows = await db().selectFrom('nodes').select('node_id').execute();
    expect(rows.map((r) => r.node_id)).toEqual(expect.arrayContaining(['node-g', 'node-h']));
    await live.leave();
    await watcher.leave();
    memberships.splice(memberships.indexOf(live), 1);
    memberships.splice(memberships.indexOf(watcher), 1);
    const after = await db()
      .selectFrom('nodes')
      .select('node_id')
      .where('node_id', 'in', ['node-g', 'node-h'])
      .execute();
    expect(after).toEqual([]);
  });
});
