// Baseline for bench/soak.ts: bare Fastify routes with the soak's request mix (parse the same JSON,
// answer bodies of about the same size as Postyard's), no database, no auth, no delivery.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';

const app = Fastify({ logger: false, bodyLimit: 10 * 1024 * 1024 });
const event = (i: number) => ({
  id: randomUUID(),
  type: i % 2 ? 'message.delivered' : 'message.accepted',
  created_at: new Date().toISOString(),
  tenant_id: randomUUID(),
  transmission_id: randomUUID(),
  message_id: randomUUID(),
  recipient: `s${i}@dest.test`,
  mail_type: 'transactional',
  tags: ['receipt'],
  metadata: { order: String(i) },
  data: i % 2 ? { mx_host: 'mx.dest.test', smtp_code: 250, response: '250 OK: message queued' } : {},
});
const page = { data: Array.from({ length: 50 }, (_, i) => event(i)), next_cursor: 'x'.repeat(80) };

app.post('/v1/transmissions', async (req, reply) => {
  const body = req.body as { recipients?: unknown[] };
  return reply.code(202).send({
    transmission_id: randomUUID(),
    items: [],
    total_accepted_recipients: body.recipients?.length ?? 0,
    total_rejected_recipients: 0,
  });
});
app.get('/v1/events', async () => page);
app.get('/v1/messages/:id', async (req) => ({
  ...event(1),
  id: (req.params as { id: string }).id,
  state: 'delivered',
  attempt_count: 1,
  attempts: [{ attempt: 1, outcome: 'delivered', smtp_code: 250, transcript: 'S: 250 OK\n'.repeat(12) }],
}));
app.get('/healthz', async () => ({ status: 'ok' }));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
