/**
 * npm run bench:queue-memory — memory of a delivery worker while 1,000,000 messages wait in the
 * queue. The messages are inserted directly (the accept path is measured by bench:accept), then
 * `postyard start --roles worker` delivers to a local sink for BENCH_SECONDS (default 30) while
 * its RSS is sampled every second. Baseline in the same run: the same worker with 100,000 queued
 * (BENCH_BASELINE_QUEUED), enough to keep it busy for the whole window as well. Flat memory = the
 * RSS with a million waiting is about the same; the delivered counts show claims do not slow down.
 */
import { fork } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { insertMany } from '../src/db/batch.ts';
import type { MessagesTable } from '../src/db/schema.ts';
import { createLogger } from '../src/logger.ts';
import { validateTransmission } from '../src/modules/transmissions/transmissions.validate.ts';
import { startDnsServer } from '../test/peers/dns-server.ts';
import { freePort, machine, spawnNode, stop, table } from './lib.ts';
import { queuedRow } from './lib-queue.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const BASELINE = Number(process.env.BENCH_BASELINE_QUEUED ?? 100_000);

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

async function run(queued: number, sinkPort: number, dnsAddress: string) {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-queue-'));
  const env = {
    POSTYARD_DATA_DIR: dir,
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_DEV_MODE: 'true',
    POSTYARD_DNS_SERVERS: dnsAddress,
    POSTYARD_MX_PORT: String(sinkPort),
    POSTYARD_EHLO_NAME: 'bench.postyard.test',
  };
  const c = await createContainer(loadConfig({ ...process.env, ...env }), createLogger('warn'));
  const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <shop@bench.test>' });
  await c.domains.create(tenant.tenant_id, await c.domains.prepare(tenant.tenant_id, { domain: 'bench.test' }));
  // One real transmission carries the content; its message rows are multiplied directly.
  const input = await validateTransmission(
    {
      recipients: [{ email: 'r0@dest.test' }],
      content: { subject: 'Receipt', text: 'Thanks for your order.' },
    } as never,
    'Shop <shop@bench.test>',
  );
  const accepted = await c.database.db
    .transaction()
    .execute((trx) => c.transmissions.accept(trx, tenant.tenant_id, input));
  const now = new Date().toISOString();
  const t0 = performance.now();
  for (let start = 1; start < queued; start += 50_000) {
    const rows: MessagesTable[] = [];
    for (let i = start; i < Math.min(queued, start + 50_000); i++) {
      rows.push(queuedRow(tenant.tenant_id, accepted.transmission_id, `r${i}@dest.test`, now));
    }
    await c.database.db.transaction().execute((trx) => insertMany(trx, 'messages', rows));
  }
  const insertSecs = (performance.now() - t0) / 1000;
  await c.close();
  const child = spawnNode(['bin/postyard-src.js', 'start', '--roles', 'worker'], env);
  const samples: number[] = [];
  for (let s = 0; s < SECONDS; s++) {
    await new Promise((r) => setTimeout(r, 1000));
    samples.push(rssMb(child.pid as number));
  }
  await stop(child);
  // How much was delivered in the window: claims must not slow down with the size of the queue.
  const check = await createContainer(loadConfig({ ...process.env, ...env }), createLogger('warn'));
  const delivered = Number(
    (
      await check.database.db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('state', '=', 'delivered')
        .executeTakeFirstOrThrow()
    ).n,
  );
  await check.close();
  rmSync(dir, { recursive: true, force: true });
  const steady = samples.slice(Math.floor(samples.length / 3));
  return {
    queued,
    delivered,
    insertSecs,
    first: samples[0] ?? 0,
    min: Math.min(...steady),
    max: Math.max(...steady),
    last: samples.at(-1) ?? 0,
  };
}

async function main() {
  console.log(`machine: ${machine()}; worker runs ${SECONDS} s per case, RSS sampled every second`);
  const port = await freePort();
  const sink = fork('bench/sink-server.ts', {
    env: { ...process.env, PORT: String(port) },
    execArgv: ['--import', 'tsx'],
  });
  await new Promise((r) => sink.once('message', r));
  const dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx.dest.test' }] },
    'mx.dest.test': { A: ['127.0.0.1'] },
  });
  try {
    // The baseline queue is big enough to keep the worker busy for the whole window too.
    const base = await run(BASELINE, port, dnsServer.address);
    const big = await run(1_000_000, port, dnsServer.address);
    console.log(
      table(
        [base, big].map((r) => ({
          queued: r.queued,
          'insert s': r.insertSecs,
          'RSS after 1 s MB': Math.round(r.first),
          'steady min MB': Math.round(r.min),
          'steady max MB': Math.round(r.max),
          'last MB': Math.round(r.last),
          [`delivered in ${SECONDS} s`]: r.delivered,
        })),
      ),
    );
    console.log(
      `ratio of steady max RSS, 1,000,000 queued vs ${BASELINE} queued: ${(big.max / base.max).toFixed(2)} (flat = about 1)`,
    );
  } finally {
    await stop(sink);
    await dnsServer.close();
  }
}

await main();
