/**
 * npm run bench:inbound — DSNs per second through the inbound listener (walk the MIME with
 * mailsplit, match the signed VERP token, classify, state `bounced`, event and suppression,
 * many reports per transaction) on SQLite, against a bare smtp-server receiving and discarding
 * the same messages in the same run. Both servers run in this process; the client is another
 * process (bench/inbound-client.ts: BENCH_CONNECTIONS connections, default 32, each pipelining
 * its messages), so the server, not the client, is the limit, and the ratio compares servers.
 * Target (issue 17): >= 1,000 DSNs/s on SQLite. BENCH_DSNS: DSNs per round (default 3,000);
 * BENCH_ROUNDS: rounds (default 3), bare and Postyard alternating, medians reported.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { fork } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { buildApp } from '../src/app.ts';
import { createLogger } from '../src/logger.ts';
import { startInboundServer } from '../src/smtp/inbound-listener.ts';
import { VerpSigner } from '../src/modules/outcomes/verp.ts';
import { postfixDsn } from '../test/inbound/corpus.ts';
import { machine, table } from './lib.ts';

const N = Number(process.env.BENCH_DSNS ?? 3_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Rounds of bare then Postyard, each on fresh messages; the median of each is reported. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TOTAL = N * ROUNDS;

/** Sends every mail through the forked client (bench/inbound-client.ts); returns the seconds taken. */
async function sendAll(port: number, mails: { to: string; raw: string }[]): Promise<number> {
  const child = fork(fileURLToPath(new URL('./inbound-client.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: 'inherit',
  });
  try {
    const answer = await new Promise<{ seconds: number; ok: number; errors: number; error?: string }>(
      (resolve, reject) => {
        child.once('message', (m) => resolve(m as { seconds: number; ok: number; errors: number }));
        child.once('error', reject);
        child.once('exit', (code) => reject(new Error(`client exited (${code})`)));
        child.send({ port, connections: CONNECTIONS, mails });
      },
    );
    if (answer.error) throw new Error(answer.error);
    if (answer.ok !== mails.length)
      throw new Error(`${answer.ok} of ${mails.length} accepted (${answer.errors} refused)`);
    return answer.seconds;
  } finally {
    child.disconnect();
  }
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
// N messages per round, marked delivered (what a DSN can bounce), in transmissions of 1,000.
for (let i = 0; i < TOTAL; i += 1000) {
  const count = Math.min(1000, TOTAL - i);
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

// Bare and Postyard alternate, so a load spike on a shared machine hits both alike; each round
// sends its own N messages' DSNs (a bounced message cannot bounce again).
const bareRuns: number[] = [];
const inboundRuns: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const round = mails.slice(r * N, (r + 1) * N);
  bareRuns.push(N / (await sendAll(barePort, round)));
  inboundRuns.push(N / (await sendAll(inbound.port, round)));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const bounced = await c.database.db
  .selectFrom('messages')
  .select((eb) => eb.fn.countAll<number>().as('n'))
  .where('state', '=', 'bounced')
  .executeTakeFirstOrThrow();

const bareRate = median(bareRuns);
const inboundRate = median(inboundRuns);
console.log(
  `bench:inbound  ${machine()}  ${ROUNDS} rounds of ${N} DSNs (Postfix style, ${mails[0]?.raw.length} bytes), ${CONNECTIONS} pipelining connections (client in its own process)`,
);
const runs = (xs: number[]) => xs.map((x) => Math.round(x)).join(' / ');
console.log(
  table([
    { server: 'bare smtp-server (discard)', 'DSNs/s (median)': Math.round(bareRate), rounds: runs(bareRuns) },
    { server: 'Postyard inbound (SQLite)', 'DSNs/s (median)': Math.round(inboundRate), rounds: runs(inboundRuns) },
  ]),
);
console.log(
  `ratio Postyard / bare (medians): ${(inboundRate / bareRate).toFixed(2)}; messages bounced: ${Number(bounced.n)} of ${TOTAL}`,
);
console.log(`target >= 1,000 DSNs/s: ${inboundRate >= 1000 ? 'met' : 'NOT met'}`);
await inbound.close();
await new Promise<void>((r) => bare.close(() => r()));
await app.close();
await c.close();
rmSync(dataDir, { recursive: true, force: true });
