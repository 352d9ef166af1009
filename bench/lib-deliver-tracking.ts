/**
 * bench/deliver.ts --tracking: the cost of open and click tracking on delivery (issue 16).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { table } from './lib.ts';
import { median, postyard } from './lib-deliver.ts';

/** 20 links, as a marketing newsletter has: products, footer, social. */
export const HTML_LINKS = `<html><body>${Array.from(
  { length: 20 },
  (_, i) =>
    `<p>Item ${i}: <a href="https://shop.bench.test/products/${1000 + i}?utm_source=newsletter&amp;utm_campaign=week47">see the offer</a></p>`,
).join('')}</body></html>`;

/**
 * --tracking: the same 20-link html delivered with tracking off and on, SQLite, in blocks of
 * rounds off, on, on, off (BENCH_ROUNDS blocks, default 6), after one uncounted warm-up round.
 * Each block gives two pairs (its first two rounds, its last two), each pair the ratio of two
 * neighbouring rounds, so drift in the machine's load between pairs cancels; the figure is the
 * median of the pairs' ratios, which one disturbed round cannot move much (a mean of four rounds
 * swung 0.69-0.92 on a quiet machine, issue 16). Printed with it: the median of the pairs' CPU per
 * message ratios (worker process with its render threads, plus this process running the sink).
 * Default: 2,500 messages per round, 24 rounds plus the warm-up, about 2-3 minutes on the 2-core
 * dev machine when quiet.
 */
export async function trackingCost(sinkPort: number, dnsAddress: string, N: number) {
  type Run = { tracking: boolean; rate: number; cpu: number };
  const round = async (tracking: boolean, messages: number): Promise<Run> => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-deliver-'));
    try {
      const r = await postyard(
        `sqlite, tracking ${tracking ? 'on' : 'off'}`,
        { POSTYARD_DATA_DIR: dir },
        sinkPort,
        dnsAddress,
        { html: HTML_LINKS, tracking },
        messages,
      );
      console.log(
        `${r.label}: ${Math.round(r.rate)} msgs/s (peak RSS ${Math.round(r.rss)} MB; CPU per message: worker ${r.workerCpuMs.toFixed(2)} ms, sink ${r.sinkCpuMs.toFixed(2)} ms)`,
      );
      return { tracking, rate: r.rate, cpu: r.workerCpuMs + r.sinkCpuMs };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const blocks = Number(process.env.BENCH_ROUNDS ?? 6);
  const t0 = performance.now();
  // Warm-up: the sink process and the page cache start cold; this round is not counted.
  await round(true, Math.min(N, 1000));
  const pairs: { on: Run; off: Run }[] = [];
  for (let b = 0; b < blocks; b++) {
    const [a, c, d, e] = [await round(false, N), await round(true, N), await round(true, N), await round(false, N)];
    pairs.push({ off: a, on: c }, { off: e, on: d });
  }
  const rates = pairs.map((p) => p.on.rate / p.off.rate);
  const cpus = pairs.map((p) => p.off.cpu / p.on.cpu);
  const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
  const all = (on: boolean) => pairs.map((p) => (on ? p.on : p.off));
  console.log(
    table(
      pairs.map((p, i) => ({
        pair: i + 1,
        'off msgs/s': Math.round(p.off.rate),
        'on msgs/s': Math.round(p.on.rate),
        'ratio on / off': p.on.rate / p.off.rate,
        'CPU ms/msg off': p.off.cpu.toFixed(2),
        'CPU ms/msg on': p.on.cpu.toFixed(2),
        'CPU ratio off / on': p.off.cpu / p.on.cpu,
      })),
    ),
  );
  const q = (xs: number[]) => `min ${Math.min(...xs).toFixed(3)}, max ${Math.max(...xs).toFixed(3)}`;
  console.log(
    `msgs/s: off mean ${Math.round(mean(all(false).map((r) => r.rate)))}, on mean ${Math.round(mean(all(true).map((r) => r.rate)))}; ratio of the means ${(mean(all(true).map((r) => r.rate)) / mean(all(false).map((r) => r.rate))).toFixed(3)}`,
  );
  console.log(
    `median of ${pairs.length} per-pair ratios tracking on / off (same run): ${median(rates).toFixed(3)} (${q(rates)}); target >= 0.9`,
  );
  // Worker + sink CPU per message, off / on: what throughput would be if CPU were the only limit.
  console.log(
    `median of per-pair CPU per message ratios off / on: ${median(cpus).toFixed(3)} (${q(cpus)}); CPU ms/msg medians off ${median(all(false).map((r) => r.cpu)).toFixed(2)}, on ${median(all(true).map((r) => r.cpu)).toFixed(2)}`,
  );
  console.log(
    `${N} messages per round, ${pairs.length * 2} rounds + warm-up, ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  );
}
