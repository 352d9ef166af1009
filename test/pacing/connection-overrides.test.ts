import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import pg from 'pg';
import { call, TEST_DATABASE_URL, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import type { SinkMx } from '../peers/sink-mx.ts';
import { startTwoTenants, type TwoTenants } from './two-tenants.ts';

/**
 * A tenant's messages_per_connection override (PUT /v1/pacing/sites/{site}) applies to its own
 * mail, measured at the sink: its sessions (one client port each) carry at most that many
 * messages and never another tenant's, while the other tenant keeps the file's value.
 */
let scene: TwoTenants;
let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;
let sink: SinkMx;
let worker: DeliveryWorker;
const signing = testSigningKey();

beforeAll(async () => {
  scene = await startTwoTenants(signing);
  ({ ctx, a, b, sink } = scene);
}, 60_000);
afterAll(async () => {
  await worker?.stop();
  await scene?.close();
});

async function send(t: TestTenant, prefix: string, n: number) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: Array.from({ length: n }, (_, i) => ({ email: `${prefix}${i}@dest.test` })),
      content: { subject: 'Hi', text: 'Hello' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
}

/**
 * Starts the worker. On PostgreSQL the overrides table is held locked for 1.5 s meanwhile, so
 * loading the overrides is slow: CI once saw the first claim run before that load had ended (it
 * was started, not awaited), and the tenant's mail then shared sessions with the other's.
 */
async function startWhileOverridesLoadSlowly(): Promise<DeliveryWorker> {
  if (!TEST_DATABASE_URL) return startTestWorker(ctx.c, 'conn-worker', { signing });
  const locker = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await locker.connect();
  try {
    await locker.query('begin');
    await locker.query(`lock table ${ctx.pgSchema}.pacing_site_overrides in access exclusive mode`);
    const started = startTestWorker(ctx.c, 'conn-worker', { signing });
    await new Promise((r) => setTimeout(r, 1_500));
    await locker.query('commit');
    return started;
  } finally {
    await locker.end();
  }
}

describe('per-tenant connection overrides', () => {
  it("messages_per_connection of a tenant's override caps its sessions; others keep the default", async () => {
    const put = await call(ctx.app, 'PUT', '/v1/pacing/sites/default', {
      key: a.apiKey,
      body: { messages_per_connection: 2 },
    });
    expect(put.statusCode, put.body).toBe(200);
    await send(a, 'a', 12);
    await send(b, 'b', 12);
    // Both transmissions are queued before the worker starts, so it sees them together.
    worker = await startWhileOverridesLoadSlowly();
    await sink.waitForMessages(24, 30_000);
    const sessions = new Map<number, string[]>();
    for (const m of sink.messages) {
      const list = sessions.get(m.remotePort) ?? [];
      list.push(m.rcptTo[0] ?? '');
      sessions.set(m.remotePort, list);
    }
    const ofA = [...sessions.values()].filter((s) => s.some((r) => r.startsWith('a')));
    const ofB = [...sessions.values()].filter((s) => s.some((r) => r.startsWith('b')));
    expect(ofA.flat()).toHaveLength(12);
    for (const s of ofA) {
      expect(s.length).toBeLessThanOrEqual(2);
      expect(s.every((r) => r.startsWith('a'))).toBe(true);
    }
    // The other tenant is not held to 2: some session of its carried more.
    expect(Math.max(...ofB.map((s) => s.length))).toBeGreaterThan(2);
  }, 60_000);
});
