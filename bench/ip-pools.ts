/**
 * npm run bench:ip-pools — the cost of IP pools on delivery: BENCH_MESSAGES (default 5,000)
 * DKIM-signed messages delivered by the worker to a local sink with source addresses off (the
 * host's default route) and on (POSTYARD_SOURCE_ADDRESSES=127.0.0.2 in the tenant's default pool,
 * no warmup: the same number of connections as off, so the ratio is the pools' own cost: the
 * choice per message, the source_address writes, the bound sockets), rounds in the order off, on,
 * on, off so drift in the machine's load hits both alike; prints the ratio on / off (target >= 0.9,
 * issue 18).
 * SQLite; the worker runs in this process (the same for both sides).
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { createLogger } from '../src/logger.ts';
import { createDeliveryWorker } from '../src/modules/delivery/engine.ts';
import { validateTransmission } from '../src/modules/transmissions/transmissions.validate.ts';
import { startDnsServer } from '../test/peers/dns-server.ts';
import { freePort, machine, stop, table } from './lib.ts';

const N = Number(process.env.BENCH_MESSAGES ?? 5_000);
const TEXT = 'Thanks for your order. Your receipt is attached below.\n'.repeat(20);

async function startSink() {
  const port = await freePort();
  const child = fork('bench/sink-server.ts', {
    env: { ...process.env, PORT: String(port) },
    execArgv: ['--import', 'tsx'],
  });
  await new Promise((r) => child.once('message', r));
  return { port, close: () => stop(child) };
}

async function round(pools: boolean, sinkPort: number, dnsAddress: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-pools-'));
  try {
    const config = loadConfig({
      ...process.env,
      POSTYARD_DATA_DIR: dir,
      POSTYARD_LOG_LEVEL: 'warn',
      POSTYARD_DEV_MODE: 'true',
      POSTYARD_DNS_SERVERS: dnsAddress,
      POSTYARD_MX_PORT: String(sinkPort),
      POSTYARD_EHLO_NAME: 'bench.postyard.test',
      POSTYARD_SOURCE_ADDRESSES: pools ? '127.0.0.2' : '',
    });
    const c = await createContainer(config, createLogger('warn'));
    const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <shop@bench.test>' });
    await c.domains.create(tenant.tenant_id, await c.domains.prepare(tenant.tenant_id, { domain: 'bench.test' }));
    if (pools)
      await c.ipPools.create(c.database.db, tenant.tenant_id, {
        name: 'main',
        default: true,
        addresses: [{ address: '127.0.0.2' }],
      });
    for (let start = 0; start < N; start += 10_000) {
      const body = {
        recipients: Array.from({ length: Math.min(10_000, N - start) }, (_, i) => ({
          email: `r${start + i}@dest.test`,
        })),
        content: { subject: 'Receipt', text: TEXT },
      };
      const input = await validateTransmission(body as never, 'Shop <shop@bench.test>');
      await c.database.db.transaction().execute((trx) => c.transmissions.accept(trx, tenant.tenant_id, input));
    }
    const worker = createDeliveryWorker(c, 'bench-worker', { pollMs: 20 });
    const t0 = performance.now();
    worker.start();
    for (;;) {
      await new Promise((r) => setTimeout(r, 50));
      const row = await c.database.db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('state', '=', 'delivered')
        .executeTakeFirstOrThrow();
      if (Number(row.n) >= N) break;
      if (performance.now() - t0 > 600_000) throw new Error(`stuck at ${row.n}`);
    }
    const rate = N / ((performance.now() - t0) / 1000);
    await worker.stop();
    if (pools) {
      const used = await c.database.db
        .selectFrom('messages')
        .select(['source_address', (eb) => eb.fn.countAll().as('n')])
        .groupBy('source_address')
        .execute();
      console.log(`  source addresses: ${used.map((u) => `${u.source_address} ${u.n}`).join(', ')}`);
    }
    await c.close();
    return rate;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const sink = await startSink();
const dns = await startDnsServer({
  'dest.test': { MX: [{ preference: 10, exchange: 'mx.dest.test' }] },
  'mx.dest.test': { A: ['127.0.0.1'] },
});
const rows: { pools: boolean; rate: number }[] = [];
try {
  // A first round warms the process up (module loading, JIT, the render threads): not counted.
  console.log(`warm-up round: ${Math.round(await round(false, sink.port, dns.address))} msgs/s (not counted)`);
  for (const pools of [false, true, true, false]) {
    const rate = await round(pools, sink.port, dns.address);
    rows.push({ pools, rate });
    console.log(`pools ${pools ? 'on ' : 'off'}: ${Math.round(rate)} msgs/s`);
  }
} finally {
  await sink.close();
  await dns.close();
}
const mean = (on: boolean) => rows.filter((r) => r.pools === on).reduce((a, r) => a + r.rate, 0) / 2;
console.log(machine());
console.log(
  table([
    { setting: 'source addresses off', 'msgs/s (mean of 2)': Math.round(mean(false)) },
    { setting: 'default pool of 127.0.0.2', 'msgs/s (mean of 2)': Math.round(mean(true)) },
  ]),
);
console.log(`ratio on / off: ${(mean(true) / mean(false)).toFixed(3)} (target >= 0.9)`);
