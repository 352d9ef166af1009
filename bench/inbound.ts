/**
 * npm run bench:inbound — DSNs per second through the inbound listener (parse with mailparser,
 * match the signed VERP token, classify, state `bounced`, event and suppression in one
 * transaction) on SQLite, against a bare smtp-server receiving and discarding the same messages
 * in the same run. Both servers run in this process, fed by the same nodemailer pool
 * (BENCH_CONNECTIONS connections, default 8), so the client's cost is in both figures.
 * Target (issue 17): >= 1,000 DSNs/s on SQLite. BENCH_DSNS overrides the count (default 3,000).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { buildApp } from '../src/http/app.ts';
import { createLogger } from '../src/logger.ts';
import { startInboundServer } from '../src/modules/inbound/server.ts';
import { VerpSigner } from '../src/modules/inbound/verp.ts';
import { postfixDsn } from '../test/inbound/corpus.ts';
import { machine, table } from './lib.ts';

const N = Number(process.env.BENCH_DSNS ?? 3_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);

async function sendAll(port: number, mails: { to: string; raw: string }[]): Promise<number> {
  const transport = nodemailer.createTransport({
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Number.POSITIVE_INFINITY,
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    // Nagle on the client's socket holds the final "." of each message until the server's
    // delayed ACK (~40 ms): that would measure the TCP stack, not the servers (as bench/smtp.ts).
    getSocket: (_opts: unknown, cb: (err: Error | null, socketOptions?: { connection: net.Socket }) => void) => {
      const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
      socket.once('connect', () => cb(null, { connection: socket }));
      socket.once('error', (err) => cb(err));
    },
  } as nodemailer.TransportOptions);
  const started = performance.now();
  await Promise.all(mails.map((m) => transport.sendMail({ envelope: { from: '', to: [m.to] }, raw: m.raw })));
  const seconds = (performance.now() - started) / 1000;
  transport.close();
  return seconds;
}

const dataDir = mkdtempSync(join(tmpdir(), 'postyard-bench-inbound-'));
const config = loadConfig({
  POSTYARD_DATA_DIR: dataDir,
  POSTYARD_LOG_LEVEL: 'silent',
  POSTYARD_DEV_MODE: 'true',
  POSTYARD_RATE_LIMIT_RPS: '0',
});
const c = await createContainer(config, createLogger('silent'));
const app = await buildApp(c);
const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <news@shop.test>' });
// N messages, marked delivered (what a DSN can bounce), in transmissions of 1,000 recipients.
for (let i = 0; i < N; i += 1000) {
  const count = Math.min(1000, N - i);
  const res = await app.inject({
    method: 'POST',
    url: '/v1/transmissions',
    headers: { authorization: `Bearer ${tenant.api_key}` },
    payload: {
      recipients: Array.from({ length: count }, (_, k) => ({ email: `r${i + k}@dest.test` })),
      content: { subject: 'Hello', text: 'Hello there' },
    },
  });
  if (res.statusCode !== 202) throw new Error(res.body);
}
await c.database.db.updateTable('messages').set({ state: 'delivered' }).execute();
const rows = await c.database.db.selectFrom('messages').select(['id', 'recipient']).execute();
const verp = new VerpSigner(c.masterKey);
const mails = rows.map((r) => {
  const to = verp.envelopeFrom(r.id, 'bounces.shop.test');
  return { to, raw: postfixDsn({ envelopeFrom: to, recipient: r.recipient, messageId: r.id }) };
});

const bare = new SMTPServer({
  authOptional: true,
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  disableReverseLookup: true,
  size: 10 * 1024 * 1024,
  onData(stream, _s, cb) {
    stream.on('data', () => {});
    stream.on('end', () => cb(null, '2.0.0 Ok'));
  },
});
await new Promise<void>((r) => bare.listen(0, '127.0.0.1', () => r()));
const barePort = (bare.server.address() as AddressInfo).port;
const inbound = await startInboundServer(c, { port: 0, host: '127.0.0.1' });

const bareSeconds = await sendAll(barePort, mails);
const inboundSeconds = await sendAll(inbound.port, mails);
const bounced = await c.database.db
  .selectFrom('messages')
  .select((eb) => eb.fn.countAll<number>().as('n'))
  .where('state', '=', 'bounced')
  .executeTakeFirstOrThrow();

const bareRate = N / bareSeconds;
const inboundRate = N / inboundSeconds;
console.log(
  `bench:inbound  ${machine()}  ${N} DSNs (Postfix style, ${mails[0]?.raw.length} bytes), ${CONNECTIONS} connections`,
);
console.log(
  table([
    { server: 'bare smtp-server (discard)', 'DSNs/s': Math.round(bareRate), seconds: bareSeconds.toFixed(2) },
    { server: 'Postyard inbound (SQLite)', 'DSNs/s': Math.round(inboundRate), seconds: inboundSeconds.toFixed(2) },
  ]),
);
console.log(
  `ratio Postyard / bare: ${(inboundRate / bareRate).toFixed(2)}; messages bounced: ${Number(bounced.n)} of ${N}`,
);
console.log(`target >= 1,000 DSNs/s: ${inboundRate >= 1000 ? 'met' : 'NOT met'}`);
await inbound.close();
await new Promise<void>((r) => bare.close(() => r()));
await app.close();
await c.close();
rmSync(dataDir, { recursive: true, force: true });
