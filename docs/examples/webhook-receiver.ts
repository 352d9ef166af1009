import { createServer } from 'node:http';
import { verifyWebhook, webhookEvents } from '@postyard/client';

// The webhook's secret; during a rotation, both: POSTYARD_WEBHOOK_SECRET=whsec_new,whsec_old
const secrets = process.env.POSTYARD_WEBHOOK_SECRET!.split(',');

export const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      // The raw bytes as received: a re-serialized JSON object would not verify.
      const payload = verifyWebhook(Buffer.concat(chunks), req.headers, secrets);
      for (const event of webhookEvents(payload)) {
        console.log(event.id, event.type, event.recipient); // dedupe on event.id: delivery is at least once
      }
      res.writeHead(204).end();
    } catch {
      res.writeHead(401).end('bad signature');
    }
  });
});
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1');
