import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import {
  call,
  createTenant,
  createTestContext,
  TEST_DATABASE_URL,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { SPAWN_TEST_TIMEOUT_MS, SPAWN_TIMEOUT_MS } from '../helpers/server-process.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx, TEST_CA_LEAF_CERT, TEST_CA_LEAF_KEY } from '../peers/sink-mx.ts';

let dnsServer: DnsServer;
let sink: SinkMx;

beforeAll(async () => {
  sink = await startSinkMx({ tls: false });
  dnsServer = await startDnsServer({
    'crash.test': { MX: [{ preference: 10, exchange: 'mx.crash.test' }] },
    'mx.crash.test': { A: ['127.0.0.1'] },
  });
});
afterAll(async () => {
  await sink?.close();
  await dnsServer?.close();
});

function countStates(ctx: TestContext, transmissionId: string) {
  return ctx.c.database.db
    .selectFrom('messages')
    .select(['state', (eb) => eb.fn.countAll().as('n')])
    .where('transmission_id', '=', transmissionId)
    .groupBy('state')
    .execute()
    .then((rows) => Object.fromEntries(rows.map((r) => [r.state, Number(r.n)])));
}

function workerProcess(ctx: TestContext): ChildProcess {
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    ...ctx.env,
    POSTYARD_DNS_SERVERS: dnsServer.address,
    POSTYARD_MX_PORT: String(sink.port),
    POSTYARD_DELIVERY_LEASE_SECONDS: '5',
    POSTYARD_LOG_LEVEL: 'warn',
  };
  if (TEST_DATABASE_URL && ctx.pgSchema) {
    const u = new URL(TEST_DATABASE_URL);
    u.searchParams.set('options', `-c search_path=${ctx.pgSchema}`);
    env.DATABASE_URL = u.toString();
  }
  const child = spawn(process.execPath, ['bin/postyard-src.js', 'start', '--roles', 'worker'], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  spawned.push(child);
  return child;
}

/** Every worker process started here, killed in afterAll even when a test failed half-way. */
const spawned: ChildProcess[] = [];

// Spawns two worker processes, one after the other: minutes under load (SPAWN_TIMEOUT_MS).
describe('crash safety of delivery', { timeout: 2 * SPAWN_TEST_TIMEOUT_MS }, () => {
  let ctx: TestContext;
  let t: TestTenant;
  beforeAll(async () => {
    ctx = await createTestContext();
    t = await createTenant(ctx, 'Crash <c@crash-sender.test>');
  });
  afterAll(async () => {
    for (const c of spawned) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await ctx?.close();
  });

  it('delivers every message after a worker is killed with SIGKILL mid-batch', async () => {
    const n = 1500;
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: Array.from({ length: n }, (_, i) => ({ email: `k${i}@crash.test` })),
        content: { subject: 's', text: 't' },
      },
    });
    expect(res.statusCode).toBe(202);
    const id = res.json().transmission_id as string;
    const first = workerProcess(ctx);
    // From the spawn: loading the process alone took 13 s on a loaded 2-core machine.
    const deadline = Date.now() + SPAWN_TIMEOUT_MS;
    while (sink.messages.filter((m) => m.rcptTo[0]?.endsWith('@crash.test')).length < 100) {
      if (Date.now() > deadline)
        throw new Error(`first worker delivered nothing: ${JSON.stringify(await countStates(ctx, id))}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const atKill = await countStates(ctx, id);
    expect(atKill.delivered ?? 0).toBeLessThan(n);

    const second = workerProcess(ctx);
    try {
      const end = Date.now() + SPAWN_TIMEOUT_MS;
      for (;;) {
        const s = await countStates(ctx, id);
        if ((s.delivered ?? 0) === n) break;
        if (Date.now() > end) throw new Error(`not all delivered: ${JSON.stringify(s)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      second.kill('SIGTERM');
      await new Promise((r) => second.once('exit', r));
    }
    const received = new Map<string, number>();
    for (const m of sink.messages)
      for (const r of m.rcptTo) if (r.endsWith('@crash.test')) received.set(r, (received.get(r) ?? 0) + 1);
    expect(received.size).toBe(n);
    const duplicates = [...received.values()].reduce((a, v) => a + v - 1, 0);
    // At most the messages that were in flight (claimed, sent, not yet recorded) at the kill.
    expect(duplicates).toBeLessThanOrEqual(n - (atKill.delivered ?? 0));
    const delivered = await ctx.c.database.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('transmission_id', '=', id)
      .where('type', '=', 'message.delivered')
      .executeTakeFirstOrThrow();
    expect(Number(delivered.n)).toBe(n);
  });
});

describe('relay mode', () => {
  let ctx: TestContext;
  let t: TestTenant;
  let relay: SinkMx;
  beforeAll(async () => {
    // A relay gets TLS with a verified certificate (docs/operations.md "Outbound TLS"): a certificate from the test CA.
    relay = await startSinkMx({ tlsCert: TEST_CA_LEAF_CERT, tlsKey: TEST_CA_LEAF_KEY });
    ctx = await createTestContext({
      env: {
        POSTYARD_RELAY_URL: `smtp://127.0.0.1:${relay.port}`,
        POSTYARD_EXTRA_CA_FILE: fileURLToPath(new URL('../peers/certs/test-ca-cert.pem', import.meta.url)),
      },
    });
    t = await createTenant(ctx);
  });
  afterAll(async () => {
    await ctx?.close();
    await relay?.close();
  });

  it('sends every message through the configured relay, whatever the recipient domain', async () => {
    const worker = createDeliveryWorker(ctx.c, 'relay-worker', { pollMs: 50 });
    worker.start();
    try {
      const res = await call(ctx.app, 'POST', '/v1/transmissions', {
        key: t.apiKey,
        body: {
          recipients: [{ email: 'a@no-such-domain.invalid' }, { email: 'b@another.example' }],
          content: { subject: 's', text: 't' },
        },
      });
      const id = res.json().transmission_id as string;
      await relay.waitForMessages(2, 10_000);
      expect(relay.messages.flatMap((m) => m.rcptTo).sort()).toEqual(['a@no-such-domain.invalid', 'b@another.example']);
      expect(relay.messages.map((m) => m.tls)).toEqual([true, true]);
      const end = Date.now() + 5000;
      while ((await countStates(ctx, id)).delivered !== 2 && Date.now() < end)
        await new Promise((r) => setTimeout(r, 50));
      expect(await countStates(ctx, id)).toEqual({ delivered: 2 });
    } finally {
      await worker.stop();
    }
  });
});
