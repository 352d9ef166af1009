// A minimal Postyard webhook receiver that verifies signatures with the Standard Webhooks library.
//
//   npm install standardwebhooks
//   POSTYARD_WEBHOOK_SECRET=whsec_... PORT=8080 node webhook-receiver.mjs
//
// Point a webhook at http://<this host>:8080/postyard. Verification needs the raw body exactly as
// sent, so read the bytes yourself (or use your framework's "raw body" option), not a re-serialized
// JSON object.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secrets = (process.env.POSTYARD_WEBHOOK_SECRET ?? '').split(',').filter(Boolean);
if (secrets.length === 0) throw new Error('set POSTYARD_WEBHOOK_SECRET (comma-separate two during a rotation)');
const verifiers = secrets.map((s) => new Webhook(s));
const seen = new Set(); // use a database table in production: delivery is at least once

function verify(body, headers) {
  for (const wh of verifiers) {
    try {
      return wh.verify(body, headers); // checks the HMAC and that the timestamp is within 5 minutes
    } catch {}
  }
  return null;
}

createServer((req, res) => {
  if (req.method !== 'POST') return res.writeHead(405).end();
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const payload = verify(body, {
      'webhook-id': req.headers['webhook-id'],
      'webhook-timestamp': req.headers['webhook-timestamp'],
      'webhook-signature': req.headers['webhook-signature'],
    });
    if (!payload) return res.writeHead(401).end('bad signature');
    // A batch webhook sends {"batch_id", "events": [...]}; a single one sends one event.
    const events = Array.isArray(payload.events) ? payload.events : [payload];
    for (const event of events) {
      if (seen.has(event.id)) continue; // a retry of something already handled
      seen.add(event.id);
      console.log(JSON.stringify({ id: event.id, type: event.type, recipient: event.recipient }));
    }
    // Answer 2xx quickly; do slow work afterwards. Anything else (or no answer in 10 s) is retried.
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? '127.0.0.1');
