/**
 * A worker-only node (`postyard start --roles worker`, no HTTP API) serves /metrics on
 * POSTYARD_METRICS_PORT, and its series move when it delivers: the node is a real child process
 * sharing the test context's database, delivering to a sink MX.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeEnv } from '../helpers/cluster.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { metricValue } from '../helpers/metrics.ts';
import {
  BIN,
  childEnv,
  freePort,
  REPO_ROOT,
  SPAWN_TEST_TIMEOUT_MS,
  SPAWN_TIMEOUT_MS,
} from '../helpers/server-process.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';

let ctx: TestContext;
let t: TestTenant;
let dnsServer: DnsServer;
let sink: SinkMx;
let child: ChildProcess | undefined;
let output = '';
let metricsPort: number;

async function scrape(path = '/metrics'): Promise<Response | null> {
  try {
    return await fetch(`http://127.0.0.1:${metricsPort}${path}`, { signal: AbortSignal.timeout(5_000) });
  } catch {
    return null;
  }
}

beforeAll(async () => {
  sink = await startSinkMx();
  dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  ctx = await createTestContext();
  t = await createTenant(ctx, 'Shop <news@shop.test>');
  metricsPort = await freePort();
  child = spawn(process.execPath, [BIN, 'start', '--roles', 'worker'], {
    cwd: REPO_ROOT,
    env: childEnv(
      nodeEnv(ctx, {
        POSTYARD_METRICS_PORT: String(metricsPort),
        POSTYARD_METRICS_HOST: '127.0.0.1',
        // Nothing may listen on the API port of a worker-only node.
        POSTYARD_HTTP_PORT: String(await freePort()),
        POSTYARD_DNS_SERVERS: dnsServer.address,
        POSTYARD_MX_PORT: String(sink.port),
        POSTYARD_EHLO_NAME: 'worker.nodes.test',
        POSTYARD_RENDER_THREADS: '1',
      }),
    ),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (output += d));
  const deadline = Date.now() + SPAWN_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`worker node exited early: ${output}`);
    if (Date.now() > deadline) throw new Error(`worker node did not serve /metrics in time: ${output}`);
    if ((await scrape())?.status === 200) break;
    await new Promise((r) => setTimeout(r, 200));
  }
}, SPAWN_TEST_TIMEOUT_MS);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child?.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
  await ctx?.close();
  await sink?.close();
  await dnsServer?.close();
});

describe('worker-only node', () => {
  it('answers /metrics on POSTYARD_METRICS_PORT (and nothing else there)', async () => {
    const res = await scrape();
    expect(res?.status).toBe(200);
    expect(res?.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = (await res?.text()) ?? '';
    expect(text).toContain('# TYPE postyard_delivery_claims_total counter');
    expect(text).toContain('# TYPE postyard_queue_messages gauge');
    expect(text).toContain('process_resident_memory_bytes');
    expect((await scrape('/healthz'))?.status).toBe(404);
    expect((await scrape('/v1/openapi.json'))?.status).toBe(404);
  });

  it("counts the worker's own deliveries on that port", async () => {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: 'ann@dest.test' }], content: { subject: 'Hi', text: 'Hello' } },
    });
    expect(res.statusCode, res.body).toBe(202);
    const deadline = Date.now() + 60_000;
    let text = '';
    for (;;) {
      text = (await (await scrape())?.text()) ?? '';
      if ((metricValue(text, 'postyard_delivery_attempts_total', { outcome: 'delivered' }) ?? 0) >= 1) break;
      if (Date.now() > deadline) throw new Error(`no delivery counted: ${text.slice(0, 2000)}\n${output.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(sink.messages.length).toBe(1);
    expect(metricValue(text, 'postyard_delivery_claimed_messages_total')).toBe(1);
    expect(metricValue(text, 'postyard_delivery_accept_to_delivered_seconds_count')).toBe(1);
    expect(metricValue(text, 'postyard_render_duration_seconds_count')).toBe(1);
  }, 90_000);
});
