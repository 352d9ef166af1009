import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Pool } from 'undici';

/** Helpers for bench/soak.ts: an open-loop HTTP load generator and process statistics. */

export type Kind = 'send' | 'events' | 'message';

export interface WindowStats {
  seconds: number;
  sent: number;
  ok: number;
  errors: number;
  /** Requests not sent because too many were outstanding (the server fell far behind). */
  shed: number;
  statuses: Record<string, number>;
  p50: number;
  p99: number;
  max: number;
  sendP99: number;
  getP99: number;
}

const TEXT = 'Thanks for your order. Your receipt is attached below.\n'.repeat(12);
const HTML = `<html><body>${'<p>Thanks for your order. Your receipt is below.</p>'.repeat(12)}</body></html>`;

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] as number;
}

/**
 * Open-loop load: request i is due at t0 + i / rate whether or not earlier ones have answered
 * (no coordinated omission), and its latency is measured from that due time. The mix is fixed by
 * i mod 20. Every POST has its own recipient `s<seq>@dest.test`; `accepted[seq]` is set on 202.
 */
export class OpenLoop {
  readonly accepted: Uint8Array;
  acceptedCount = 0;
  /** True once every request of the schedule has been sent (answers may still be out). */
  scheduleDone = false;
  private postSeq = 0;
  private outstanding = 0;
  private win = this.emptyWindow();
  private winStart = performance.now();
  private readonly pool: Pool;
  private readonly txIds: string[] = [];
  private readonly msgIds: string[] = [];
  private readonly prefix: string;
  private readonly suffix: string;

  constructor(
    origin: string,
    private readonly o: {
      key: string | null;
      rate: number;
      /** Out of 20: POST /v1/transmissions, GET /v1/events; the rest GET /v1/messages/:id. */
      sendOf20: number;
      eventsOf20: number;
      capacity: number;
      maxOutstanding?: number;
    },
  ) {
    this.accepted = new Uint8Array(o.capacity);
    this.pool = new Pool(origin, { connections: 256, headersTimeout: 60_000, bodyTimeout: 60_000 });
    const body = JSON.stringify({
      recipients: [{ email: '@@', name: 'Soak Recipient' }],
      content: { subject: 'Your receipt', text: TEXT, html: HTML },
      options: { tags: ['receipt'], metadata: { order: '42' } },
    });
    [this.prefix, this.suffix] = body.split('@@') as [string, string];
  }

  private emptyWindow() {
    return { sent: 0, ok: 0, errors: 0, shed: 0, statuses: {} as Record<string, number>, all: [] as number[] };
  }
  private sendLat: number[] = [];
  private getLat: number[] = [];

  /** Statistics since the previous call. */
  takeWindow(): WindowStats {
    const now = performance.now();
    const w = this.win;
    const all = w.all.sort((a, b) => a - b);
    const s = this.sendLat.sort((a, b) => a - b);
    const g = this.getLat.sort((a, b) => a - b);
    const out: WindowStats = {
      seconds: (now - this.winStart) / 1000,
      sent: w.sent,
      ok: w.ok,
      errors: w.errors,
      shed: w.shed,
      statuses: w.statuses,
      p50: pct(all, 50),
      p99: pct(all, 99),
      max: all.at(-1) ?? Number.NaN,
      sendP99: pct(s, 99),
      getP99: pct(g, 99),
    };
    this.win = this.emptyWindow();
    this.sendLat = [];
    this.getLat = [];
    this.winStart = now;
    return out;
  }

  private kindOf(i: number): Kind {
    const r = i % 20;
    if (r < this.o.sendOf20) return 'send';
    if (r < this.o.sendOf20 + this.o.eventsOf20 || this.msgIds.length === 0) return 'events';
    return 'message';
  }

  private eventsPath(i: number): string {
    const recent = Math.max(0, this.postSeq - 2000 + (i % 1000));
    const tx = this.txIds[i % Math.max(1, this.txIds.length)];
    switch (i % 4) {
      case 0:
        return '/v1/events?limit=50';
      case 1:
        return '/v1/events?type=message.delivered&limit=50';
      case 2:
        return `/v1/events?recipient=s${recent}%40dest.test`;
      default:
        return tx ? `/v1/events?transmission_id=${tx}` : '/v1/events?limit=20';
    }
  }

  private remember(list: string[], id: string) {
    if (list.length < 1000) list.push(id);
    else list[Math.floor(Math.random() * 1000)] = id;
  }

  private async fire(i: number, due: number) {
    const kind = this.kindOf(i);
    const headers: Record<string, string> = this.o.key ? { authorization: `Bearer ${this.o.key}` } : {};
    let seq = -1;
    let path: string;
    let body: string | undefined;
    if (kind === 'send') {
      seq = this.postSeq++;
      path = '/v1/transmissions';
      body = `${this.prefix}s${seq}@dest.test${this.suffix}`;
      headers['content-type'] = 'application/json';
    } else if (kind === 'events') path = this.eventsPath(i);
    else path = `/v1/messages/${this.msgIds[i % this.msgIds.length]}`;
    this.outstanding++;
    this.win.sent++;
    let status = 'error';
    try {
      const res = await this.pool.request({ path, method: kind === 'send' ? 'POST' : 'GET', headers, body });
      status = String(res.statusCode);
      const harvest = (kind === 'send' && res.statusCode === 202) || (kind === 'events' && i % 4 < 2);
      if (harvest) {
        const json = (await res.body.json()) as { transmission_id?: string; data?: { message_id?: string }[] };
        if (json.transmission_id) this.remember(this.txIds, json.transmission_id);
        for (const e of json.data ?? []) if (e.message_id) this.remember(this.msgIds, e.message_id);
      } else await res.body.dump();
      if (kind === 'send' && res.statusCode === 202 && seq < this.accepted.length) {
        this.accepted[seq] = 1;
        this.acceptedCount++;
      }
    } catch {
      status = 'error';
    } finally {
      this.outstanding--;
    }
    const ms = performance.now() - due;
    const good = status === '202' || status === '200';
    this.win.statuses[status] = (this.win.statuses[status] ?? 0) + 1;
    if (good) this.win.ok++;
    else this.win.errors++;
    this.win.all.push(ms);
    (kind === 'send' ? this.sendLat : this.getLat).push(ms);
  }

  /** Posts sent so far (the highest recipient index + 1). */
  get posts(): number {
    return this.postSeq;
  }

  /** Sends for `seconds` at the rate, then waits for the answers of requests still out. */
  async run(seconds: number): Promise<void> {
    const total = Math.round(seconds * this.o.rate);
    const max = this.o.maxOutstanding ?? 5000;
    const t0 = performance.now();
    this.winStart = t0;
    let i = 0;
    await new Promise<void>((resolve) => {
      const tick = () => {
        const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * this.o.rate));
        for (; i < due; i++) {
          if (this.outstanding >= max) this.win.shed++;
          else void this.fire(i, t0 + (i * 1000) / this.o.rate);
        }
        if (i < total) setTimeout(tick, 1);
        else {
          this.scheduleDone = true;
          resolve();
        }
      };
      tick();
    });
    while (this.outstanding > 0) await new Promise((r) => setTimeout(r, 20));
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/**
 * RSS (MB), CPU seconds (user + system, all threads) and bytes written to storage (MB, all
 * threads: the SQLite WAL and the checkpoints) of a process, from /proc.
 */
export function procStat(pid: number): { rssMb: number; cpuSeconds: number; writtenMb: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+) kB/.exec(status);
    // Fields after the parenthesised command name: utime is the 12th, stime the 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const io = /^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return {
      rssMb: rss ? Number(rss[1]) / 1024 : Number.NaN,
      cpuSeconds: (Number(f[11]) + Number(f[12])) / 100,
      writtenMb: io ? Number(io[1]) / 2 ** 20 : Number.NaN,
    };
  } catch {
    return { rssMb: Number.NaN, cpuSeconds: Number.NaN, writtenMb: Number.NaN };
  }
}

/**
 * From a Prometheus /metrics page (prom-client default metrics): V8 heap used and RSS (MB), the
 * event loop's delay since the previous scrape (prom-client resets its histogram on every
 * collect, so with one scraper these are per window) and the cumulative GC pause time.
 */
export async function scrapeServer(origin: string): Promise<{
  heapMb: number;
  heapTotalMb: number;
  externalMb: number;
  rssMb: number;
  loopMaxMs: number;
  loopP99Ms: number;
  gcSeconds: number;
}> {
  try {
    const text = await (await fetch(`${origin}/metrics`)).text();
    /** Sum of every sample of `name` (all label sets). */
    const sum = (name: string) => {
      let total = Number.NaN;
      for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'gm'))) {
        total = (Number.isNaN(total) ? 0 : total) + Number(m[1]);
      }
      return total;
    };
    return {
      heapMb: sum('nodejs_heap_size_used_bytes') / 2 ** 20,
      // What V8 has committed (heap total) and the memory outside its heap it accounts for
      // (Buffers, ArrayBuffers): with RSS, they tell a step of V8's from one of native code's.
      heapTotalMb: sum('nodejs_heap_size_total_bytes') / 2 ** 20,
      externalMb: sum('nodejs_external_memory_bytes') / 2 ** 20,
      rssMb: sum('process_resident_memory_bytes') / 2 ** 20,
      loopMaxMs: sum('nodejs_eventloop_lag_max_seconds') * 1000,
      loopP99Ms: sum('nodejs_eventloop_lag_p99_seconds') * 1000,
      gcSeconds: sum('nodejs_gc_duration_seconds_sum'),
    };
  } catch {
    return {
      heapMb: Number.NaN,
      heapTotalMb: Number.NaN,
      externalMb: Number.NaN,
      rssMb: Number.NaN,
      loopMaxMs: Number.NaN,
      loopP99Ms: Number.NaN,
      gcSeconds: Number.NaN,
    };
  }
}

export function mean(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x));
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : Number.NaN;
}

/** Least-squares slope of ys over xs. */
export function slope(xs: number[], ys: number[]): number {
  const mx = mean(xs);
  const my = mean(ys);
  let num = 0;
  let den = 0;
  xs.forEach((x, k) => {
    num += (x - mx) * ((ys[k] as number) - my);
    den += (x - mx) ** 2;
  });
  return den ? num / den : Number.NaN;
}

/**
 * Runs bench/fsync-probe.ts in `dir` and keeps its samples: per window, the longest fdatasync of
 * an 8 KB block on that disk (what a commit waits for), so a latency spike can be told apart from
 * a stall of the storage under it.
 */
export class FsyncProbe {
  private readonly child: ChildProcess;
  private samples: number[] = [];
  private partial = '';

  constructor(readonly dir: string) {
    this.child = spawn(process.execPath, ['--import', 'tsx', 'bench/fsync-probe.ts', dir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.child.stdout?.setEncoding('utf8');
    this.child.stdout?.on('data', (chunk: string) => {
      const lines = (this.partial + chunk).split('\n');
      this.partial = lines.pop() ?? '';
      for (const l of lines) this.samples.push(Number(l.split(' ')[1]));
    });
  }

  /** The samples since the last call: their maximum and how many took over 100 ms. */
  takeWindow(): { maxMs: number; over100: number } {
    const s = this.samples;
    this.samples = [];
    return { maxMs: s.length ? Math.max(...s) : Number.NaN, over100: s.filter((v) => v > 100).length };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}
