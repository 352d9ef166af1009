/**
 * npm run bench:workers — delivery throughput with 1, 2 and 4 worker processes on one PostgreSQL.
 * For each K: a fresh database (postyard_bench_<pid>_<n>, dropped afterwards), BENCH_MESSAGES
 * (default 20,000) single-recipient messages queued through the real accept path and DKIM-signed
 * with the sending domain's RSA-2048 key, then K `postyard start --roles worker` processes deliver
 * them via MX lookup (DNS on loopback) to a sink in its own process that checks each message
 * arrived exactly once. The clock runs from spawning the workers until every message is
 * `delivered` in the database. Baseline: K = 1 in the same run (ratio column).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:workers
 *   BENCH_WORKERS=1,2,4 BENCH_ROUNDS=2 BENCH_PER_TRANSMISSION=1 BENCH_MESSAGES=20000
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { machine, machineCpu, stop, table } from './lib.ts';
import { compareDelivery, freshPgDatabase, startRecipientSink, withPg } from './lib-pg.ts';
import { procStat } from './lib-soak.ts';
import { queueBacklog, spawnWorkers, startMxDns, waitDelivered, workerEnv } from './lib-workers.ts';

const N = Number(process.env.BENCH_MESSAGES ?? 20_000);
const KS = (process.env.BENCH_WORKERS ?? '1,2,4').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const PER_TX = Number(process.env.BENCH_PER_TRANSMISSION ?? 1);
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';

interface Result {
  k: number;
  round: number;
  rate: number;
  steadyRate: number;
  workerCpuMsPerMsg: number;
  machineBusyPct: number;
  duplicates: number;
  lost: number;
  queueSecs: number;
}

async function runOnce(k: number, round: number, dns: string): Promise<Result> {
  const db = await freshPgDatabase(PG_URL);
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-workers-'));
  const sink = await startRecipientSink(N + 1);
  try {
    const env = workerEnv(dir, db.url, sink.port, dns);
    const queueSecs = await queueBacklog(env, N, PER_TX);
    await withPg(db.url, (c) => c.query('ANALYZE'));
    const cpu0 = machineCpu();
    const workers = spawnWorkers(k, env);
    try {
      const workerCpu = () => workers.reduce((a, w) => a + procStat(w.pid as number).cpuSeconds, 0);
      // Worker CPU is counted from the first delivery: start-up (loading the sources) is excluded.
      let cpuAtFirst = 0;
      const t = await waitDelivered(db.url, N, () => {
        cpuAtFirst = workerCpu();
      });
      const cpu1 = machineCpu();
      const cpuDelivering = workerCpu() - cpuAtFirst;
      await Promise.all(workers.map((w) => stop(w)));
      const check = compareDelivery(new Uint8Array(N).fill(1), N, await sink.dump().then((d) => d.counts));
      return {
        k,
        round,
        rate: N / t.totalSecs,
        steadyRate: N / t.firstToLastSecs,
        workerCpuMsPerMsg: (cpuDelivering * 1000) / N,
        machineBusyPct: (100 * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total),
        duplicates: check.duplicates,
        lost: check.lost,
        queueSecs,
      };
    } finally {
      await Promise.all(workers.map((w) => stop(w)));
    }
  } finally {
    await sink.close();
    rmSync(dir, { recursive: true, force: true });
    await db.drop();
  }
}

async function main() {
  if (!PG_URL) {
    console.error('bench:workers needs PostgreSQL: DATABASE_URL=postgres://... npm run bench:workers');
    process.exit(2);
  }
  const la = () =>
    loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
  console.log(`machine: ${machine()}, load average ${la()}`);
  console.log(
    `${N} messages (${PER_TX} recipient(s) per transmission, text + HTML ~2.6 KB, RSA-2048 DKIM), workers ${KS.join(', ')}, ${ROUNDS} round(s)`,
  );
  const dns = await startMxDns();
  const results: Result[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const k of KS) {
        const r = await runOnce(k, round, dns.address);
        console.log(
          `  round ${round} K=${k}: ${Math.round(r.rate)} msgs/s (queued in ${r.queueSecs.toFixed(1)} s), load average ${la()}`,
        );
        results.push(r);
      }
    }
  } finally {
    await dns.close();
  }
  const avg = (k: number, f: (r: Result) => number) => {
    const rs = results.filter((r) => r.k === k);
    return rs.reduce((a, r) => a + f(r), 0) / rs.length;
  };
  const base = avg(KS[0] as number, (r) => r.rate);
  console.log(
    table(
      KS.map((k) => ({
        workers: k,
        'msgs/s': Math.round(avg(k, (r) => r.rate)),
        'first-to-last msgs/s': Math.round(avg(k, (r) => r.steadyRate)),
        [`ratio to K=${KS[0]}`]: avg(k, (r) => r.rate) / base,
        'worker CPU ms/msg': avg(k, (r) => r.workerCpuMsPerMsg),
        'machine CPU busy %': Math.round(avg(k, (r) => r.machineBusyPct)),
        duplicates: avg(k, (r) => r.duplicates),
        lost: avg(k, (r) => r.lost),
      })),
    ),
  );
  console.log(
    'msgs/s: from spawning the workers (process start included) to the last message delivered; ' +
      'first-to-last: from the first delivery seen (polled every 200 ms) to the last; worker CPU: all ' +
      'worker processes, from the first delivery on; machine CPU busy: all cores, PostgreSQL and the sink included.',
  );
  if (results.some((r) => r.lost > 0 || r.duplicates > 0)) process.exitCode = 1;
}

await main();
