/** The receiver of docs/webhooks.md (docs/examples/webhook-receiver.mjs) works against Postyard. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { SPAWN_TEST_TIMEOUT_MS, SPAWN_TIMEOUT_MS } from '../helpers/server-process.ts';
import { createWebhook, sleep } from './helpers.ts';

let ctx: TestContext;
let t: TestTenant;
let child: ChildProcess | null = null;
let output = '';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function startExample(port: number, secret: string) {
  child = spawn(process.execPath, ['docs/examples/webhook-receiver.mjs'], {
    env: { ...process.env, PORT: String(port), POSTYARD_WEBHOOK_SECRET: secret },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  // A node process may take seconds to start on a loaded machine (SPAWN_TIMEOUT_MS).
  const deadline = Date.now() + SPAWN_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const up = await fetch(`http://127.0.0.1:${port}/`).then(
      () => true,
      () => false,
    );
    if (up) return;
    await sleep(50);
  }
  throw new Error('example receiver did not start');
}

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  child?.kill('SIGTERM');
  await ctx?.close();
});

describe('docs/examples/webhook-receiver.mjs', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('accepts signed deliveries (also across a rotation) and refuses forged ones', async () => {
    const port = await freePort();
    const hook = await createWebhook(ctx, t.apiKey, { url: `http://127.0.0.1:${port}/postyard` });
    await startExample(port, hook.secret);

    const res = await call(ctx.app, 'POST', `/v1/webhooks/${hook.id}/test`, { key: t.apiKey });
    expect(res.json()).toMatchObject({ delivered: true, status_code: 204 });
    await sleep(100);
    expect(output).toContain('"type":"webhook.test"');

    // After a rotation the receiver still holds the old secret: both are signing for 24 h.
    await call(ctx.app, 'POST', `/v1/webhooks/${hook.id}/rotate-secret`, { key: t.apiKey });
    const again = await call(ctx.app, 'POST', `/v1/webhooks/${hook.id}/test`, { key: t.apiKey });
    expect(again.json()).toMatchObject({ delivered: true, status_code: 204 });

    const forged = await fetch(`http://127.0.0.1:${port}/postyard`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': 'msg_1',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}`,
      },
      body: '{"id":"x","type":"message.delivered"}',
    });
    expect(forged.status).toBe(401);
  });
});
