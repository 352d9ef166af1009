/**
 * Webhook receiver for bench:webhooks, run as its own process so it does not share a CPU with
 * the dispatcher. Answers 204 to every POST and counts requests and events (a batch body counts
 * its events); GET /stats reports the counts, POST /reset clears them.
 */
import { createServer } from 'node:http';

let requests = 0;
let events = 0;
const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ requests, events }));
  }
  if (req.url === '/reset') {
    requests = 0;
    events = 0;
    res.writeHead(204);
    return res.end();
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events?: unknown[] };
    requests++;
    events += Array.isArray(body.events) ? body.events.length : 1;
    res.writeHead(204);
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
