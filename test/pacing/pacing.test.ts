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
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { writePacingFile } from './pacing-file.ts';

/**
 * Pacing end to end (docs/pacing.md) against a sink MX on loopback: a per-minute limit holds as
 * measured at the sink (with two workers on two containers sharing the database on PostgreSQL,
 * i.e. two nodes' ledgers), and an automation rule suspends a site x address on a scripted
 * `421 4.7.0 [TSS04]`, the mail waits (no attempt counted) and goes out when the suspension ends.
 */
const PACING_FILE = `
sites:
  yahoo:
    mx: [.yahoodns.test]
    max_connections: 2
    messages_per_connection: 100
    messages_per_minute: 1000
    messages_per_hour: 10000
  default:
    max_connections: 5
    messages_per_connection: 1000
    messages_per_minute: 1000
    messages_per_hour: 10000
rules:
  - id: yahoo-tss04
    sites: [yahoo]
    match: '\\bTSS04\\b'
    action: suspend
    duration_seconds: 8
`;

let ctx: TestContext;
let ctx2: TestContext | null = null;
let t: TestTenant;
let dnsServer: DnsServer;
let sink: SinkMx;
const workers: DeliveryWorker[] = [];
const signing = testSigningKey();
let deferTss04 = 0;

beforeAll(async () => {
  sink = await startSinkMx({
    script: ({ rcpt, stage }) => {
      if (stage === 'rcpt' && rcpt.endsWith('@yahoo.test') && deferTss04 > 0) {
        deferTss04--;
        return {
          code: 421,
          message: '4.7.0 [TSS04] Messages from 127.0.0.1 temporarily deferred due to user complaints',
        };
      }
      return 'accept';
    },
  });
  dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
    'yahoo.test': { MX: [{ preference: 10, exchange: 'mta5.am0.yahoodns.test' }] },
    'mta5.am0.yahoodns.test': { A: ['127.0.0.1'] },
    ...signing.zone,
  });
  const file = writePacingFile(PACING_FILE);
  ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dnsServer.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
      POSTYARD_PACING_FILE: file,
    },
  });
  t = await createTenant(ctx, 'Shop <news@shop.test>');
  // A second node on PostgreSQL: its own container, pool and pacing ledger, the same database.
  if (DIALECT === 'postgres') {
    ctx2 = await createTestContext({ shareWith: ctx, env: { POSTYARD_EHLO_NAME: 'node2.postyard.test' } });
  }
}, 60_000);
afterAll(async () => {
  for (const w of workers) await w.stop();
  await ctx2?.close();
  await ctx?.close();
  await sink?.close();
  await dnsServer?.close();
});

async function send(recipients: string[]) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: { recipients: recipients.map((email) => ({ email })), content: { subject: 'Hi', text: 'Hello' } },
  });
  expect(res.statusCode, res.body).toBe(202);
  return res.json().transmission_id as string;
}

async function states(transmissionId: string) {
  return ctx.c.database.db
    .selectFrom('messages')
    .select(['recipient', 'state', 'attempt_count', 'next_attempt_at'])
    .where('transmission_id', '=', transmissionId)
    .execute();
}

async function until<T>(what: () => Promise<T> | T, ok: (v: T) => boolean, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await what();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out; last value ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The most messages any `windowMs` window of arrival times holds. */
function busiestWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < sorted.length; hi++) {
    while ((sorted[hi] as number) - (sorted[lo] as number) >= windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

describe('pacing at the sink', () => {
  it('an automation rule suspends the site x address; the mail waits unsent and goes when it ends', async () => {
    // One message at a time per worker: on PostgreSQL the two nodes each take part of the mail, so the
    // limit holds only if their grants add up (per-process counters let 8 through in a minute).
    workers.push(startTestWorker(ctx.c, 'pacing-w1', { signing, batchSize: 1, maxInflight: 1 }));
    if (ctx2) workers.push(startTestWorker(ctx2.c, 'pacing-w2', { signing, batchSize: 1, maxInflight: 1 }));
    deferTss04 = 1;
    const before = sink.messages.length;
    const first = await send(['first@yahoo.test']);
    // The first reply is the scripted 421 [TSS04]: deferred as usual, and the rule fires.
    await until(
      () => states(first),
      (r) => r[0]?.state === 'deferred',
      20_000,
    );
    // The rule's row is written beside the outcome: poll for it.
    const s = await until(
      async () => {
        const list = await call(ctx.app, 'GET', '/v1/pacing/suspensions', { key: t.apiKey });
        expect(list.statusCode).toBe(200);
        return list.json().data.find((x: { site: string }) => x.site === 'yahoo');
      },
      (x) => x !== undefined,
      5_000,
    );
    expect(s).toMatchObject({ site: 'yahoo', source_address: null, rule: 'yahoo-tss04', action: 'suspend' });
    expect(s.reason).toContain('TSS04');
    const endsAt = Date.parse(s.until);
    expect(endsAt).toBeGreaterThan(Date.now());
    // Every node reloads suspensions every 2 s (the node that got the reply acts at once): on
    // PostgreSQL the second node may still send for that long (docs/pacing.md).
    await new Promise((r) => setTimeout(r, 2_500));
    // Mail for the suspended site waits: not sent, not failed, no attempt counted.
    const rest = await send(['r1@yahoo.test', 'r2@yahoo.test', 'r3@yahoo.test']);
    const waiting = await until(
      () => states(rest),
      (r) => r.every((m) => m.state === 'queued' && Date.parse(m.next_attempt_at) >= endsAt - 1000),
      10_000,
    );
    expect(waiting.every((m) => m.attempt_count === 0)).toBe(true);
    const after = await until(
      () => states(rest),
      (r) => r.every((m) => m.state === 'delivered'),
      30_000,
    );
    expect(after).toHaveLength(3);
    const arrived = sink.messages.slice(before).filter((m) => m.rcptTo[0]?.endsWith('@yahoo.test'));
    expect(arrived.every((m) => m.receivedAt >= endsAt - 50)).toBe(true);
    // The deferred first message is retried (made due now) and delivered: nothing lost.
    await ctx.c.database.db
      .updateTable('messages')
      .set({ next_attempt_at: new Date().toISOString() })
      .where('transmission_id', '=', first)
      .execute();
    await until(
      () => states(first),
      (r) => r[0]?.state === 'delivered',
      20_000,
    );
    const gone = await call(ctx.app, 'GET', '/v1/pacing/suspensions', { key: t.apiKey });
    expect(gone.json().data.find((x: { site: string }) => x.site === 'yahoo')).toBeUndefined();
  }, 90_000);

  it('no 60-second window at the sink carries more than messages_per_minute, and nothing is lost', async () => {
    const put = await call(ctx.app, 'PUT', '/v1/pacing/sites/default', {
      key: t.apiKey,
      body: { messages_per_minute: 5 },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().effective.messages_per_minute).toBe(5);
    // Overrides reach the workers within their 2 s refresh.
    await new Promise((r) => setTimeout(r, 2_500));
    const before = sink.messages.length;
    const tx = await send(Array.from({ length: 8 }, (_, i) => `m${i}@dest.test`));
    await until(
      () => states(tx),
      (r) => r.every((m) => m.state === 'delivered'),
      120_000,
    );
    const times = sink.messages
      .slice(before)
      .filter((m) => m.rcptTo[0]?.endsWith('@dest.test'))
      .map((m) => m.receivedAt);
    expect(times).toHaveLength(8);
    expect(busiestWindow(times, 60_000)).toBeLessThanOrEqual(5);
    if (ctx2) {
      // Both nodes sent (each announces its own EHLO name): the limit held across them.
      const helos = new Set(
        sink.messages
          .slice(before)
          .filter((m) => m.rcptTo[0]?.endsWith('@dest.test'))
          .map((m) => m.heloName),
      );
      expect(helos.size).toBe(2);
    }
    const rows = await states(tx);
    expect(rows.every((m) => m.attempt_count === 1)).toBe(true);
  }, 150_000);
});
