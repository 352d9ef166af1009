/**
 * node --import tsx bench/tracking-render.ts — what tracking adds to a message's render, without
 * SMTP, the database or a sink (issue 16; docs/benchmarks.md "Tracking on vs off"). The bench's
 * 20-link html (the same as bench/deliver.ts --tracking) is rendered and DKIM-signed (RSA-2048)
 * through a real RenderPool with one render thread, with requests shaped as the delivery worker
 * sends them (transmission, tracking plan with its link table, signing key: structured clone per
 * message), 8 in flight. Rounds off, on, on, off, BENCH_ROUNDS blocks (default 3), BENCH_MESSAGES
 * per round (default 3,000) after 300 uncounted; prints per round the process CPU per message
 * (main thread + render thread), the render thread's busy time per message (event-loop
 * utilization: wall time, so it grows when the machine is loaded) and the message size, and the
 * medians. The worker has one render thread on a 2-core machine (config.ts renderThreads): when
 * that thread is delivery's narrowest step, the throughput ratio on / off follows its busy time.
 *
 * Why a second measure: bench/deliver.ts --tracking measures throughput, which on this 2-core
 * machine swings more from round to round than tracking's whole cost when anything else runs;
 * CPU per rendered message moves far less with the load.
 */
import { randomUUID } from 'node:crypto';
import type { Worker } from 'node:worker_threads';
import pino from 'pino';
import { RenderPool } from '../src/modules/delivery/render/render-pool.ts';
import { forDelivery, type RenderRequest } from '../src/modules/delivery/render/renderer.ts';
import { trackingPlan } from '../src/modules/tracking/render-plan.ts';
import { trackedLinks } from '../src/modules/tracking/rewrite.ts';
import { deriveTokenKey } from '../src/modules/tracking/token.ts';
import { benchMessageRow, benchSigningKey, machine, table } from './lib.ts';

const N = Number(process.env.BENCH_MESSAGES ?? 3000);
const BLOCKS = Number(process.env.BENCH_ROUNDS ?? 3);
const TEXT = 'Thanks for your order. Your receipt is attached below.\n'.repeat(20);
/** The same 20 links as bench/deliver.ts --tracking. */
const HTML = `<html><body>${Array.from(
  { length: 20 },
  (_, i) =>
    `<p>Item ${i}: <a href="https://shop.bench.test/products/${1000 + i}?utm_source=newsletter&amp;utm_campaign=week47">see the offer</a></p>`,
).join('')}</body></html>`;
const signingKey = benchSigningKey();
const ctx = { base: 'http://localhost:3000', key: deriveTokenKey(Buffer.alloc(32, 7)) };

/** A transmission as TransmissionCache makes it (transmission-cache.ts keep). */
function transmission(on: boolean): RenderRequest['tx'] {
  const content = JSON.stringify({
    from: 'Shop <shop@bench.test>',
    subject: 'Receipt',
    text: TEXT,
    html: HTML,
    reply_to: null,
    headers: {},
    attachments: [],
    template_id: null,
    substitution_data: null,
  });
  const base = forDelivery({
    id: randomUUID(),
    content,
    raw_message: null,
    options: JSON.stringify({ sandbox: false, open_tracking: on, click_tracking: on }),
    tracking_links: on ? trackedLinks(HTML) : null,
  });
  const tracking = trackingPlan(ctx, {
    tenant_id: randomUUID(),
    mail_type: 'transactional',
    tags: [],
    options: base.options,
  });
  return { ...base, options: { ...base.options, tracking } };
}

/**
 * The pool's one render thread (a private field, read for this measure only): its event loop's
 * busy time per message is what bounds delivery when that thread is the pipeline's narrowest step.
 */
function renderThread(pool: RenderPool): Worker {
  const t = (pool as unknown as { threads: ({ worker: Worker } | null)[] }).threads[0];
  if (!t) throw new Error('no render thread');
  return t.worker;
}

async function round(on: boolean) {
  const tx = transmission(on);
  const pool = new RenderPool(1, pino({ level: 'silent' }));
  // As lane.ts builds it: a new request object per message over the cached transmission.
  const req = (i: number): RenderRequest => ({
    msg: benchMessageRow(tx.id, i),
    tx: { id: tx.id, content: tx.content, raw: tx.raw, options: tx.options, fromDomain: tx.fromDomain },
    key: signingKey,
    verpToken: 'abcdefghijklmnopqrstuvwxyz0123456789',
    bounceHost: 'localhost',
  });
  try {
    for (let i = 0; i < 300; i++) await pool.render(req(i));
    let bytes = 0;
    let next = 0;
    const thread = renderThread(pool);
    const busy0 = thread.performance.eventLoopUtilization();
    const cpu0 = process.cpuUsage();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (;;) {
          const i = next++;
          if (i >= N) return;
          const r = await pool.render(req(i));
          bytes += r.raw.length;
        }
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    const busy = thread.performance.eventLoopUtilization(busy0);
    return { on, cpuUs: (cpu.user + cpu.system) / N, threadUs: (busy.active * 1000) / N, bytes: bytes / N };
  } finally {
    await pool.close();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

console.log(`machine: ${machine()}; ${N} messages per round, ${BLOCKS} blocks of off, on, on, off`);
const rounds: Awaited<ReturnType<typeof round>>[] = [];
for (let b = 0; b < BLOCKS; b++) for (const on of [false, true, true, false]) rounds.push(await round(on));
console.log(
  table(
    rounds.map((r, i) => ({
      round: i + 1,
      tracking: r.on ? 'on' : 'off',
      'CPU us/msg': r.cpuUs.toFixed(1),
      'render thread busy us/msg': r.threadUs.toFixed(1),
      'bytes/msg': Math.round(r.bytes),
    })),
  ),
);
const off = median(rounds.filter((r) => !r.on).map((r) => r.cpuUs));
const on = median(rounds.filter((r) => r.on).map((r) => r.cpuUs));
console.log(
  `CPU per message (main + render thread, medians): off ${off.toFixed(1)} us, on ${on.toFixed(1)} us; tracking adds ${(on - off).toFixed(1)} us (ratio off / on ${(off / on).toFixed(3)})`,
);
const tOff = median(rounds.filter((r) => !r.on).map((r) => r.threadUs));
const tOn = median(rounds.filter((r) => r.on).map((r) => r.threadUs));
console.log(
  `render thread busy per message (medians): off ${tOff.toFixed(1)} us, on ${tOn.toFixed(1)} us (ratio off / on ${(tOff / tOn).toFixed(3)})`,
);
