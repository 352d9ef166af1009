import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';
import { writePacingFile } from './pacing-file.ts';

/**
 * Mail claimed by a node that gets no connection slot goes back to the queue for the node that
 * holds the slots (docs/pacing.md "When another node holds every slot"), two nodes on PostgreSQL.
 * Site limit max_connections 1; node A holds the slot with slow sends (the sink answers each
 * DATA after 150 ms) and a queue of 120 messages; node B claims the 10 late messages while A
 * has no room. Before: B kept them in memory until A's lane ended (its whole queue sent) or their
 * lease ran out, and then sent them itself. Now B hands them back after a few seconds without a
 * slot and A, still sending, delivers them. Nothing is lost or sent twice, and the sink never sees
 * two sessions at once.
 */
const PACING_FILE = `
sites:
  default:
    max_connections: 1
    messages_per_connection: 1000
    messages_per_minute: 1000000
    messages_per_hour: 10000000
`;
const CLIENT = '127.0.0.1';
const SLOW = 120;
const LATE = 10;

let node1: TestContext;
let node2: TestContext;
let slow: TestTenant;
let late: TestTenant;
let destination: Destination;
const workers: DeliveryWorker[] = [];
const signing = testSigningKey();
/** The sink answers no DATA until the gate opens (node A holds the slot and has no room). */
let openGate: () => void = () => {};
const gate = new Promise<void>((resolve) => {
  openGate = resolve;
});

beforeAll(async () => {
  if (DIALECT !== 'postgres') return;
  destination = await startDestination({
    signing,
    sink: {
      script: ({ stage }) =>
        stage === 'data' ? gate.then(() => new Promise((r) => setTimeout(() => r('accept' as const), 150))) : 'accept',
    },
  });
  const file = writePacingFile(PACING_FILE);
  node1 = await createTestContext({
    env: { ...destination.env, POSTYARD_EHLO_NAME: 'node1.postyard.test', POSTYARD_PACING_FILE: file },
  });
  node2 = await createTestContext({ shareWith: node1, env: { POSTYARD_EHLO_NAME: 'node2.postyard.test' } });
  slow = await createTenant(node1, 'Shop <news@shop.test>');
  late = await createTenant(node1, 'Shop <news@shop.test>');
}, 60_000);
afterAll(async () => {
  openGate();
  for (const w of workers) await w.stop();
  await node2?.close();
  await node1?.close();
  await destination?.close();
});

async function send(t: TestTenant, prefix: string, n: number) {
  const res = await call(node1.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: Array.from({ length: n }, (_, i) => ({ email: `${prefix}${i}@dest.test` })),
      content: { subject: 'Hi', text: 'Hello' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number) {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Messages of `tenant` claimed by `workerId` now. */
async function claimedBy(tenant: TestTenant, workerId: string): Promise<number> {
  const rows = await node1.c.database.db
    .selectFrom('messages')
    .select('id')
    .where('tenant_id', '=', tenant.tenantId)
    .where('locked_by', '=', workerId)
    .execute();
  return rows.length;
}

describe.runIf(DIALECT === 'postgres')('a node without a connection slot hands its mail back (postgres)', () => {
  it('the late messages node B claimed are delivered by node A, which holds the slot', async () => {
    const sink = destination.sink;
    // Node A claims all the slow mail: with maxInflight SLOW it then has no room to claim more
    // until some of it is sent, and the gate holds the first message at DATA. In one claim: in
    // claims of the default size (50) the tenant's share (3/4 of maxInflight) stops it at 100.
    await send(slow, 'slow', SLOW);
    workers.push(startTestWorker(node1.c, 'handback-a', { signing, maxInflight: SLOW, batchSize: SLOW }));
    await until('node A claimed the slow mail', async () => (await claimedBy(slow, 'handback-a')) === SLOW, 60_000);
    await until('node A session open', () => sink.openSessions(CLIENT) === 1, 30_000);
    // Node B: the late mail is due while A has no room, so B claims it.
    workers.push(startTestWorker(node2.c, 'handback-b', { signing }));
    await send(late, 'late', LATE);
    await until('node B claimed the late mail', async () => (await claimedBy(late, 'handback-b')) === LATE, 60_000);
    const claimedAt = Date.now();
    openGate();

    // Generous: A delivers them a few seconds after B hands them back (3 s without a slot).
    await until(
      'the late messages at the sink',
      () => sink.messages.filter((m) => m.rcptTo[0]?.startsWith('late')).length >= LATE,
      90_000,
    );
    const lateAt = sink.messages.filter((m) => m.rcptTo[0]?.startsWith('late'));
    const slowLeft = SLOW - sink.messages.filter((m) => m.rcptTo[0]?.startsWith('slow')).length;
    console.log(
      `late messages ${Math.max(...lateAt.map((m) => m.receivedAt)) - claimedAt} ms after B claimed them; ` +
        `slow messages still to send then: ${slowLeft}`,
      new Set(lateAt.map((m) => m.heloName)),
    );
    // Sent by the node that held the slot, not by B once A's queue ran dry.
    expect(new Set(lateAt.map((m) => m.heloName))).toEqual(new Set(['node1.postyard.test']));

    // Nothing lost, nothing sent twice, never two sessions at once.
    await sink.waitForMessages(SLOW + LATE, 120_000);
    await new Promise((r) => setTimeout(r, 500));
    const rcpts = sink.messages.map((m) => m.rcptTo[0]);
    expect(rcpts).toHaveLength(SLOW + LATE);
    expect(new Set(rcpts).size).toBe(SLOW + LATE);
    await until(
      'every message recorded delivered',
      async () => {
        const rows = await node1.c.database.db
          .selectFrom('messages')
          .select(['state', 'attempt_count'])
          .where('tenant_id', 'in', [slow.tenantId, late.tenantId])
          .execute();
        return rows.length === SLOW + LATE && rows.every((r) => r.state === 'delivered' && r.attempt_count === 1);
      },
      30_000,
    );
    expect(sink.peakSessions(CLIENT)).toBe(1);
  }, 240_000);
});
