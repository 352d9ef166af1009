/** verifyWebhook against real signed deliveries from the server (Standard Webhooks). */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Postyard, verifyWebhook, WebhookVerificationFailed, webhookEvents } from '@postyard/client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LiveServer, startLiveServer } from './helpers.ts';

interface Received {
  body: Buffer;
  headers: IncomingHttpHeaders;
}

let live: LiveServer;
let client: Postyard;
let receiver: Server;
let receiverUrl: string;
let received: Received[] = [];

beforeAll(async () => {
  live = await startLiveServer();
  client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ body: Buffer.concat(chunks), headers: req.headers });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  receiver?.closeAllConnections();
  await new Promise((resolve) => receiver?.close(resolve));
  await live?.close();
});
beforeEach(() => {
  received = [];
});

async function deliverTest(id: string): Promise<Received> {
  const res = await client.webhooks.test(id);
  expect(res).toMatchObject({ delivered: true, status_code: 204 });
  const got = received.at(-1);
  if (!got) throw new Error('nothing received');
  return got;
}

describe('verifyWebhook', () => {
  it('accepts a real signed delivery (bytes, string, Headers) and returns the event', async () => {
    const hook = await client.webhooks.create({ url: receiverUrl });
    const { body, headers } = await deliverTest(hook.id);
    const payload = verifyWebhook(body, headers, hook.secret as string);
    expect(webhookEvents(payload).map((e) => e.type)).toEqual(['webhook.test']);
    expect(verifyWebhook(body.toString('utf8'), headers, hook.secret as string)).toEqual(payload);
    const fetchHeaders = new Headers(Object.entries(headers).map(([k, v]) => [k, String(v)]));
    expect(verifyWebhook(body, fetchHeaders, hook.secret as string)).toEqual(payload);
  });

  it('rejects a tampered body, a forged signature, a wrong secret and missing headers', async () => {
    const hook = await client.webhooks.create({ url: receiverUrl });
    const { body, headers } = await deliverTest(hook.id);
    const secret = hook.secret as string;
    const tampered = body.toString('utf8').replace('webhook.test', 'message.bounced');
    expect(() => verifyWebhook(tampered, headers, secret)).toThrow(WebhookVerificationFailed);
    const forged = { ...headers, 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` };
    expect(() => verifyWebhook(body, forged, secret)).toThrow(WebhookVerificationFailed);
    const other = await client.webhooks.create({ url: receiverUrl });
    expect(() => verifyWebhook(body, headers, other.secret as string)).toThrow(WebhookVerificationFailed);
    const { 'webhook-id': _id, ...noId } = headers;
    expect(() => verifyWebhook(body, noId, secret)).toThrow(/missing webhook-id/);
  });

  it('rejects a replay outside the 5-minute window', async () => {
    const hook = await client.webhooks.create({ url: receiverUrl });
    const { body, headers } = await deliverTest(hook.id);
    const old = { ...headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 600) };
    expect(() => verifyWebhook(body, old, hook.secret as string)).toThrow(/too old|did not verify/);
  });

  it('during a rotation, the new secret alone or the old one alone verifies', async () => {
    const hook = await client.webhooks.create({ url: receiverUrl });
    const rotated = await client.webhooks.rotateSecret(hook.id);
    const { body, headers } = await deliverTest(hook.id);
    expect(String(headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(() => verifyWebhook(body, headers, rotated.secret)).not.toThrow();
    expect(() => verifyWebhook(body, headers, hook.secret as string)).not.toThrow();
    expect(() => verifyWebhook(body, headers, [rotated.secret, hook.secret as string])).not.toThrow();
  });

  it('a batch webhook body yields its events', async () => {
    const hook = await client.webhooks.create({ url: receiverUrl, dispatch_policy: 'batch' });
    const { body, headers } = await deliverTest(hook.id);
    const payload = verifyWebhook(body, headers, hook.secret as string);
    expect('batch_id' in payload).toBe(true);
    expect(webhookEvents(payload).map((e) => e.type)).toEqual(['webhook.test']);
  });
});
