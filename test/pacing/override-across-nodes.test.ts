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
import { testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';
import { sampleClaims, startNodeWorkers } from './claim-sampler.ts';
import { writePacingFile } from './pacing-file.ts';

/**
 * A tenant's max_connections override (PUT /v1/pacing/sites/{site}) holds for all nodes together
 * (docs/pacing.md "Tenant overrides", "Connections across nodes"), measured at the sink. Each
 * tenant sends from its own address (its default IP pool), so the sink's count of sessions open
 * from an address is that tenant's: tenant A (override max_connections 1) never has more than 1
 * open, tenant B (the file's 3) has more than 1, with two nodes holding A's claimed mail at one
 * moment on PostgreSQL (one node on SQLite). Sessions carry 5 messages each, so slots are taken
 * and given back all the time. Nothing is lost or sent twice.
 */
const PACING_FILE = `
sites:
  default:
    max_connections: 3
    messages_per_connection: 5
    messages_per_minute: 1000000
    messages_per_hour: 10000000
`;
const ADDRESS_A = '127.0.0.2';
const ADDRESS_B = '127.0.0.3';
const EACH = 150;

let node1: TestContext;
let node2: TestContext | null = null;
let a: TestTenant;
let b: TestTenant;
let destination: Destination;
const workers: DeliveryWorker[] = [];
const signing = testSigningKey();

beforeAll(async () => {
  // Sessions stay open long enough to overlap.
  destination = await startDestination({ signing, sink: { dataDelayMs: 15 } });
  const file = writePacingFile(PACING_FILE);
  node1 = await createTestContext({
    env: {
      ...destination.env,
      POSTYARD_EHLO_NAME: 'node1.postyard.test',
      POSTYARD_PACING_FILE: file,
      POSTYARD_SOURCE_ADDRESSES: `${ADDRESS_A},${ADDRESS_B}`,
    },
  });
  if (DIALECT === 'postgres') {
    node2 = await createTestContext({ shareWith: node1, env: { POSTYARD_EHLO_NAME: 'node2.postyard.test' } });
  }
  a = await createTenant(node1, 'Shop <news@shop.test>');
  b = await createTenant(node1, 'Shop <news@shop.test>');
}, 60_000);
afterAll(async () => {
  for (const w of workers) await w.stop();
  await node2?.close();
  await node1?.close();
  await destination?.close();
});

async function put(t: TestTenant, method: 'POST' | 'PUT', url: string, body: unknown) {
  const res = await call(node1.app, method, url, { key: t.apiKey, body });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

describe(`a tenant's max_connections override across nodes (${DIALECT})`, () => {
  it('the tenant never has more sessions open than its override, the other tenant keeps the default', async () => {
    await put(a, 'POST', '/v1/ip-pools', { name: 'own', default: true, addresses: [{ address: ADDRESS_A }] });
    await put(b, 'POST', '/v1/ip-pools', { name: 'own', default: true, addresses: [{ address: ADDRESS_B }] });
    await put(a, 'PUT', '/v1/pacing/sites/default', { max_connections: 1 });
    // Queued before the workers start, in several transmissions so every node finds plenty.
    for (const [t, prefix] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      for (let k = 0; k < 3; k++) {
        await put(t, 'POST', '/v1/transmissions', {
          recipients: Array.from({ length: EACH / 3 }, (_, i) => ({ email: `${prefix}${k}-${i}@dest.test` })),
          content: { subject: 'Hi', text: 'Hello' },
        });
      }
    }
    // Small claims, each node holding part of each tenant's mail at once (startNodeWorkers).
    const nodes = [{ c: node1.c, workerId: 'override-w1' }];
    if (node2) nodes.push({ c: node2.c, workerId: 'override-w2' });
    workers.push(...(await startNodeWorkers(nodes, { signing, batchSize: 20 }, 1_000)));
    const sink = destination.sink;
    const started = Date.now();
    const sampler = sampleClaims(node1.c.database, [a.tenantId]);
    let holders: Set<string>;
    try {
      await sink.waitForMessages(2 * EACH, 150_000);
    } finally {
      holders = await sampler.stop();
    }
    // Anything sent twice would arrive a little later.
    await new Promise((r) => setTimeout(r, 500));
    const ofA = sink.messages.filter((m) => m.rcptTo[0]?.startsWith('a'));
    const ofB = sink.messages.filter((m) => m.rcptTo[0]?.startsWith('b'));
    console.log(
      `${2 * EACH} messages in ${Date.now() - started} ms; peak sessions A ${sink.peakSessions(ADDRESS_A)}, B ${sink.peakSessions(ADDRESS_B)}`,
      'A from',
      new Set(ofA.map((m) => m.heloName)),
      'B from',
      new Set(ofB.map((m) => m.heloName)),
      "A's mail held by",
      holders,
    );
    // Each tenant's mail left from its own address only, so the sink's count per address is its.
    expect(new Set(ofA.map((m) => m.remoteAddress))).toEqual(new Set([ADDRESS_A]));
    expect(new Set(ofB.map((m) => m.remoteAddress))).toEqual(new Set([ADDRESS_B]));
    // Both nodes held claimed mail of the tenant at one moment, so both asked for its slots (else
    // this proves nothing about two nodes). Which of them sent it is not the point (claim-sampler.ts).
    if (node2) expect(holders).toEqual(new Set(['override-w1', 'override-w2']));
    expect(sink.peakSessions(ADDRESS_A)).toBe(1);
    expect(sink.peakSessions(ADDRESS_B)).toBeGreaterThan(1);
    expect(sink.peakSessions(ADDRESS_B)).toBeLessThanOrEqual(3);
    // Nothing lost, nothing sent twice.
    const rcpts = sink.messages.map((m) => m.rcptTo[0]);
    expect(rcpts).toHaveLength(2 * EACH);
    expect(new Set(rcpts).size).toBe(2 * EACH);
    const rows = await node1.c.database.db
      .selectFrom('messages')
      .select(['state'])
      .where('tenant_id', 'in', [a.tenantId, b.tenantId])
      .execute();
    expect(rows).toHaveLength(2 * EACH);
    expect(rows.filter((r) => r.state !== 'delivered')).toEqual([]);
  }, 180_000);
});
