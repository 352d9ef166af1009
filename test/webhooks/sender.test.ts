/**
 * The whole-request deadline of WebhookSender (docs/webhooks.md "Retries and disabling": no complete answer within
 * the timeout is a failed attempt), kept by one shared timer rather than a signal per POST.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookSender } from '../../src/modules/webhooks/sender.ts';

let server: Server;
let base: string;
const timers = new Set<NodeJS.Timeout>();

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    if (req.url === '/silent') return; // never answers
    if (req.url === '/drip') {
      // Headers at once, then a body byte every 100 ms: each chunk is in time, the whole is not.
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write('.'), 100);
      timers.add(t);
      res.on('close', () => clearInterval(t));
      return;
    }
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const t of timers) clearInterval(t);
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const post = (sender: WebhookSender, path: string) =>
  sender.send({ url: `${base}${path}`, msgId: 'msg_1', body: '{}', keys: [Buffer.from('k')] });

describe('WebhookSender deadline', () => {
  it('fails a POST with no answer in time; a 2xx whose body never ends is cut off at the deadline', async () => {
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 400 });
    try {
      const started = Date.now();
      const [silent, drip, ok] = await Promise.all([
        post(sender, '/silent'),
        post(sender, '/drip'),
        post(sender, '/ok'),
      ]);
      const took = Date.now() - started;
      expect(ok).toMatchObject({ ok: true, statusCode: 204 });
      expect(silent).toMatchObject({ ok: false, statusCode: null, error: 'no answer within 0.4 s' });
      // The 2xx status line is the answer (as before the shared timer): delivered, and the
      // dripping body is not waited for past the deadline.
      expect(drip).toMatchObject({ ok: true, statusCode: 200 });
      expect(drip.durationMs).toBeGreaterThanOrEqual(390);
      expect(took).toBeGreaterThanOrEqual(390);
      expect(took).toBeLessThan(1500);
      // The shared timer stops when nothing is in flight, and starts again with the next POST.
      expect(await post(sender, '/silent')).toMatchObject({ ok: false, error: 'no answer within 0.4 s' });
    } finally {
      await sender.close();
    }
  });
});
