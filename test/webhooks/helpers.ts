/** A real HTTP receiver on 127.0.0.1 for webhook tests, plus small shared helpers. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import { nowIso } from '../../src/lib/clock.ts';
import { insertEvents } from '../../src/modules/events/events.repo.ts';
import type { EventType, EventView, NewEvent } from '../../src/modules/events/events.types.ts';
import { type DispatcherOptions, WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { call, type TestContext } from '../helpers/context.ts';

export interface Received {
  n: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  delayMs?: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Decides the answer to each request (default 200). */
  respond: (r: Received) => Reply;
  waitFor(pred: (all: Received[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(respond: (r: Received) => Reply = () => ({ status: 200 })): Promise<Receiver> {
  const received: Received[] = [];
  const r: Receiver = {
    url: '',
    port: 0,
    received,
    respond,
    async waitFor(pred, timeoutMs = 10_000) {
      const end = Date.now() + timeoutMs;
      while (!pred(received)) {
        if (Date.now() > end)
          throw new Error(`receiver: condition not met in ${timeoutMs} ms (${received.length} received)`);
        await sleep(20);
      }
    },
    close: () =>
      new Promise((res) => {
        server.close(() => res());
        server.closeAllConnections(); // keep-alive and still-delayed requests would hold close() open
      }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: Received = {
        n: received.length + 1,
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      received.push(rec);
      const reply = r.respond(rec);
      const send = () => {
        res.writeHead(reply.status, { 'content-type': 'text/plain', ...(reply.headers ?? {}) });
        res.end(reply.body ?? '');
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  r.port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${r.port}/hook`;
  return r;
}

export function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Verifies a received request with the standardwebhooks library; returns the parsed body. */
export function verify(secret: string, rec: Received): unknown {
  return new Webhook(secret).verify(rec.body, {
    'webhook-id': String(rec.headers['webhook-id']),
    'webhook-timestamp': String(rec.headers['webhook-timestamp']),
    'webhook-signature': String(rec.headers['webhook-signature']),
  });
}

/** All events carried by received requests (single bodies and batches alike). */
export function eventsOf(received: Received[]): EventView[] {
  return received.flatMap((r) => {
    const body = JSON.parse(r.body) as EventView | { events: EventView[] };
    return 'events' in body ? body.events : [body];
  });
}

export interface CreatedHook {
  id: string;
  secret: string;
  status: string;
  enabled: boolean;
  [k: string]: unknown;
}

export async function createWebhook(
  ctx: TestContext,
  key: string,
  body: Record<string, unknown>,
): Promise<CreatedHook> {
  const res = await call(ctx.app, 'POST', '/v1/webhooks', { key, body });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as CreatedHook;
}

let seq = 0;
export function newEvent(tenantId: string, over: Partial<NewEvent> = {}): NewEvent {
  seq++;
  return {
    tenantId,
    type: 'message.accepted' as EventType,
    transmissionId: null,
    messageId: null,
    recipient: `user${seq}@example.com`,
    mailType: 'transactional',
    tags: [],
    metadata: {},
    data: {},
    ...over,
  };
}

/** Writes events the way the rest of the system does (events + outbox + tags in one transaction). */
export async function emit(ctx: TestContext, events: NewEvent[]) {
  return ctx.c.database.db.transaction().execute((trx) => insertEvents(trx, events));
}

/** Fast test timings: retries after 100 ms, quick polling; everything else as in production. */
export const FAST: Omit<DispatcherOptions, 'nodeId'> = {
  retryDelaysMs: [100, 100, 100],
  jitter: 0,
  fanoutIntervalMs: 20,
  idlePollMs: 50,
  flushIntervalMs: 20,
};

export function startDispatcher(
  ctx: TestContext,
  opts: Omit<DispatcherOptions, 'nodeId'> = FAST,
  nodeId = 'test-node',
) {
  const d = new WebhookDispatcher(ctx.c.database, ctx.c.webhooks.registry, ctx.c.webhooks.sender, ctx.c.logger, {
    ...opts,
    nodeId,
  });
  d.start();
  return d;
}

export async function deliveriesOf(ctx: TestContext, key: string, webhookId: string) {
  const res = await call(ctx.app, 'GET', `/v1/webhooks/${webhookId}/deliveries`, { key, query: { limit: '1000' } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { data: Record<string, unknown>[] }).data;
}

/** Polls until `fn` returns a truthy value. */
export async function eventually<T>(
  fn: () => Promise<T>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await sleep(25);
  }
}

export { nowIso };
