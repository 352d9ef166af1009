import { Agent, request } from 'node:http';

/**
 * Latency as a client sees it, for benches that also run autocannon's closed loop (a closed loop
 * at N connections measures saturation: latency = N / throughput).
 *
 * - openLoop: requests started on a fixed schedule (one every 1000/rate ms), whatever the answers
 *   do, on as many connections as are busy: a stall of the server shows up in the latencies of
 *   every request sent meanwhile instead of delaying the next ones (no coordinated omission).
 *   Latency counts from the actual start; how late this process started requests against the
 *   schedule (setTimeout's slack, its own pauses) is reported apart (late p99 / max).
 *   autocannon's `overallRate` is not that: each connection sends its share of the second
 *   back-to-back and then waits for the next second (lib/httpClient.js, a per-second budget), and
 *   its coordinated-omission correction uses Math.ceil(1 / rate) = 1 ms as the expected interval
 *   (lib/run.js), which records a 10 ms answer as ten values 10, 9, ..., 1 ms.
 * - oneConnection: one request at a time on one kept-alive connection (closed loop at 1).
 */
export interface Latency {
  requests: number;
  /** Answers that were not 2xx, and transport errors. */
  bad: number;
  p50: number;
  p99: number;
  max: number;
  /** Requests per second completed. */
  rps: number;
  /** Open loop only: how late this process started requests against the schedule, ms. */
  lateP99?: number;
  lateMax?: number;
}

type Get = (path: string) => Promise<boolean>;

function client(base: string, headers: Record<string, string>, sockets: number): { get: Get; close: () => void } {
  const u = new URL(base);
  const agent = new Agent({ keepAlive: true, maxSockets: sockets });
  const get: Get = (path) =>
    new Promise((resolve) => {
      const req = request({ host: u.hostname, port: u.port, path, headers, agent }, (res) => {
        res.on('data', () => {});
        res.on('end', () => resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300));
        res.on('error', () => resolve(false));
      });
      req.on('error', () => resolve(false));
      req.end();
    });
  return { get, close: () => agent.destroy() };
}

/** Nearest-rank percentile of sorted values. */
function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

function summary(ms: number[], bad: number, seconds: number): Latency {
  const s = [...ms].sort((a, b) => a - b);
  const r = (x: number) => Number(x.toFixed(2));
  return {
    requests: ms.length,
    bad,
    p50: r(pct(s, 50)),
    p99: r(pct(s, 99)),
    max: r(s[s.length - 1] ?? Number.NaN),
    rps: Math.round(ms.length / seconds),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `rate` requests per second for `seconds` to base + path, started on schedule. */
export async function openLoop(
  base: string,
  path: string,
  headers: Record<string, string>,
  rate: number,
  seconds: number,
): Promise<Latency> {
  // Enough sockets that a slow answer never holds back the next scheduled start.
  const { get, close } = client(base, headers, 256);
  const interval = 1000 / rate;
  const total = Math.round(rate * seconds);
  const ms: number[] = [];
  const pending: Promise<void>[] = [];
  let bad = 0;
  const late: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const start = performance.now();
    late.push(start - due);
    pending.push(
      get(path).then((ok) => {
        if (ok) ms.push(performance.now() - start);
        else bad++;
      }),
    );
  }
  await Promise.all(pending);
  const took = (performance.now() - t0) / 1000;
  close();
  const l = summary(late, 0, took);
  return { ...summary(ms, bad, took), lateP99: l.p99, lateMax: l.max };
}

/** One request at a time on one kept-alive connection for `seconds`. */
export async function oneConnection(
  base: string,
  path: string,
  headers: Record<string, string>,
  seconds: number,
): Promise<Latency> {
  const { get, close } = client(base, headers, 1);
  const ms: number[] = [];
  let bad = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  while (performance.now() < end) {
    const s = performance.now();
    if (await get(path)) ms.push(performance.now() - s);
    else bad++;
  }
  const took = (performance.now() - t0) / 1000;
  close();
  return summary(ms, bad, took);
}
