/**
 * npm run bench:render-turns — how a busy render thread treats a new transmission's
 * first message, and what that costs in throughput (docs/benchmarks.md "Render turns").
 *
 * One render thread (a 2-core machine's default), 40 renders in hand at all times (the worker's 5
 * lanes of the default site x 8 rendered ahead, lane.ts), text-only mail as in
 * test/pacing/fairness.test.ts, of one transmission whose body the
 * thread keeps ("kept": shared-body.ts, a message renders synchronously) or whose recipients have
 * their own data ("personal": each message composed by MailComposer, several turns each). Meanwhile
 * a new transmission's message (a password reset) is rendered every 200 ms, BENCH_PROBES of them
 * (default 10): how long it takes, and how many of the flood's renders finish meanwhile.
 *
 * Each round runs both ways in the same process, alternating: STARTS_PER_TURN (render-pool.ts)
 * and the baseline, every request started as it arrives (what the thread did before). BENCH_ROUNDS
 * rounds (default 3) of BENCH_SECONDS (default 3) per way and content; medians and ratios printed.
 * BENCH_STARTS=n measures n starts per turn instead of the default.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { RenderPool, STARTS_PER_TURN } from '../src/modules/delivery/render/render-pool.ts';
import type { RenderRequest } from '../src/modules/delivery/render/renderer.ts';
import { median } from './lib-deliver.ts';
import { benchMessageRow, benchSigningKey, machine, table } from './lib.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const PROBES = Number(process.env.BENCH_PROBES ?? 10);
const STARTS = Number(process.env.BENCH_STARTS ?? STARTS_PER_TURN);
const IN_HAND = 40;
const AS_ARRIVED = 0;
const key = benchSigningKey();

type Kind = 'kept' | 'personal';

function request(txId: string, i: number, personal: boolean, subject: string): RenderRequest {
  const msg = benchMessageRow(txId, i, personal ? JSON.stringify({ name: `Reader ${i}` }) : null);
  const content = {
    from: 'Shop <shop@bench.test>',
    subject,
    text: personal ? 'Hello {{name}}, everything must go.\n'.repeat(10) : 'Everything must go.\n'.repeat(10),
    html: null,
    reply_to: null,
    headers: {},
    attachments: [],
    template_id: null,
  };
  return {
    msg,
    tx: { id: txId, content, raw: null, options: {}, fromDomain: 'bench.test' } as unknown as RenderRequest['tx'],
    key,
    verpToken: 'abcdefghijklmnopqrstuvwxyz0123456789',
    bounceHost: 'localhost',
  };
}

async function run(kind: Kind, startsPerTurn: number) {
  const pool = new RenderPool(1, pino({ level: 'silent' }), startsPerTurn);
  await pool.warm();
  const bulk = randomUUID();
  let done = 0;
  let next = 0;
  let stop = false;
  const flood = Array.from({ length: IN_HAND }, async () => {
    while (!stop) {
      await pool.render(request(bulk, next++, kind === 'personal', 'Sale'));
      done++;
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  const from = done;
  const began = performance.now();
  const waits: number[] = [];
  const meanwhile: number[] = [];
  for (let p = 0; p < PROBES; p++) {
    await new Promise((r) => setTimeout(r, 200));
    const d0 = done;
    const t0 = performance.now();
    await pool.render(request(randomUUID(), p, false, 'Your code'));
    waits.push(performance.now() - t0);
    meanwhile.push(done - d0);
  }
  const rest = SECONDS * 1000 - (performance.now() - began);
  if (rest > 0) await new Promise((r) => setTimeout(r, rest));
  const perSecond = (done - from) / ((performance.now() - began) / 1000);
  stop = true;
  await Promise.all(flood);
  await pool.close();
  return { perSecond, waitMs: median(waits), meanwhile: median(meanwhile) };
}

console.log(`render turns: ${machine()}; ${IN_HAND} in hand, ${STARTS} starts per turn vs as arrived`);
const rows: Record<string, string | number>[] = [];
for (const kind of ['kept', 'personal'] as const) {
  const got: Record<'turns' | 'arrived', Awaited<ReturnType<typeof run>>[]> = { turns: [], arrived: [] };
  for (let r = 0; r < ROUNDS; r++) {
    // Alternating, the first way changing every round: drift on a shared machine hits both.
    const order = r % 2 === 0 ? (['arrived', 'turns'] as const) : (['turns', 'arrived'] as const);
    for (const way of order) got[way].push(await run(kind, way === 'turns' ? STARTS : AS_ARRIVED));
  }
  for (const way of ['arrived', 'turns'] as const) {
    const runs = got[way];
    rows.push({
      content: kind,
      way: way === 'turns' ? `${STARTS} per turn` : 'as arrived',
      'renders/s': Math.round(median(runs.map((x) => x.perSecond))),
      'new tx wait ms': median(runs.map((x) => x.waitMs)).toFixed(1),
      'renders meanwhile': Math.round(median(runs.map((x) => x.meanwhile))),
    });
  }
  const ratio = median(got.turns.map((x) => x.perSecond)) / median(got.arrived.map((x) => x.perSecond));
  console.log(`${kind}: throughput ratio (per turn / as arrived) ${ratio.toFixed(3)}`);
}
console.log(table(rows));
