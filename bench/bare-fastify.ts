// Baseline for bench/accept.ts: a bare Fastify route that parses the same JSON and answers 202.
import Fastify from 'fastify';

const app = Fastify({ logger: false, bodyLimit: 10 * 1024 * 1024 });
app.post('/v1/transmissions', async (req, reply) => {
  const body = req.body as { recipients?: unknown[] };
  return reply.code(202).send({
    transmission_id: crypto.randomUUID(),
    items: [],
    total_accepted_recipients: body.recipients?.length ?? 0,
    total_rejected_recipients: 0,
  });
});
app.get('/healthz', async () => ({ status: 'ok' }));
// Baseline for bench/tracking-click.ts: what a click answers, without looking anything up.
app.get('/redirect', async (_req, reply) =>
  reply.code(302).header('Location', 'https://shop.example/sale?item=0').header('Cache-Control', 'no-store').send(),
);
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
