/**
 * Issue 13 item 9: one big request must not stall every other connection of the process.
 * A 10,000-recipient transmission used to run as one synchronous stretch (Ajv, validation, the
 * idempotency fingerprint, row building and every INSERT of the accept transaction: better-sqlite3
 * is synchronous and awaiting its resolved promises never gives the event loop a turn), so
 * /healthz, SMTP sessions and every other request waited for it.
 *
 * Measured over a real socket (Fastify reads and parses the body as in production) with a timer
 * ticking every 5 ms in the same process. The figure asserted is the most CPU time the process
 * used between two ticks, i.e. the longest synchronous stretch; wall-clock gaps are reported too
 * but, on a loaded machine, also count time spent waiting for a core. Worst of four runs, on the
 * 2-core development machine at load average ~10: before the fix 368-724 ms (SQLite) and
 * 94-177 ms (PostgreSQL, where the INSERTs are asynchronous); after it 21-58 ms and 19-44 ms.
 *
 * The stretches are held against a baseline taken in the same run, not a fixed number of
 * milliseconds: the CPU time of one JSON.parse of the same 1.3 MB body (about 10-13 ms on a quiet
 * machine), which Fastify does once per request anyway. A fixed 100 ms bar failed the fixed code
 * in a loaded PostgreSQL CI run (cpu 162/194/60/93 ms), where the baseline grows too. The bars,
 * 15x for the typical request and 40x for the worst, fail the old SQLite code (about 30-60x) and
 * leave the fixed code (3-9x quiet) room for a garbage collection or the checkpoint thread.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

/** The typical (median) longest stretch per request must stay under this many baselines. */
const MAX_STRETCH_RATIO = 15;
/**
 * No single run may pass this: process.cpuUsage() counts every thread of the process (GC
 * helpers, the SQLite checkpoint thread), so one run can show twice what the others show.
 */
const MAX_SINGLE_STRETCH_RATIO = 40;

/** The median CPU time of parsing `body`, in ms: the baseline the stretches are held against. */
function parseBaselineMs(body: string): number {
  const runs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const before = process.cpuUsage();
    JSON.parse(body);
    const used = process.cpuUsage(before);
    runs.push((used.user + used.system) / 1000);
  }
  return runs.sort((x, y) => x - y)[2] as number;
}

let ctx: TestContext;
let t: TestTenant;
let baseUrl: string;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = ctx.app.server.address() as { port: number };
  baseUrl = `http://127.0.0.1:${addr.port}`;
});
afterAll(async () => ctx?.close());

interface LoopFigures {
  /** Largest wall-clock gap between two ticks of a 5 ms timer. */
  maxGapMs: number;
  /** Largest CPU time the process used between two ticks: the longest synchronous stretch. */
  maxCpuMs: number;
  /** Slowest /healthz answer meanwhile. */
  healthzMs: number;
}

/**
 * Watches the event loop while `work` runs. The wall-clock gap is what a client feels, but on a
 * loaded machine it also counts the time the process waited for a core; the CPU time used
 * between two ticks does not, so it is what the assertion uses.
 */
async function loopBlockedDuring<T>(work: () => Promise<T>): Promise<LoopFigures & { result: T }> {
  const f: LoopFigures = { maxGapMs: 0, maxCpuMs: 0, healthzMs: 0 };
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  const timer = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage(lastCpu);
    f.maxGapMs = Math.max(f.maxGapMs, now - last);
    f.maxCpuMs = Math.max(f.maxCpuMs, (cpu.user + cpu.system) / 1000);
    last = now;
    lastCpu = process.cpuUsage();
  }, 5);
  let done = false;
  const probes = (async () => {
    while (!done) {
      const t0 = performance.now();
      const res = await fetch(`${baseUrl}/healthz`);
      await res.arrayBuffer();
      f.healthzMs = Math.max(f.healthzMs, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  try {
    const result = await work();
    return { result, ...f };
  } finally {
    done = true;
    await probes;
    clearInterval(timer);
  }
}

const show = (label: string, f: LoopFigures) =>
  `${label}: cpu ${f.maxCpuMs.toFixed(0)} ms, gap ${f.maxGapMs.toFixed(0)} ms, healthz ${f.healthzMs.toFixed(0)} ms`;

function bigBody(tag: string) {
  return JSON.stringify({
    recipients: Array.from({ length: 10_000 }, (_, i) => ({
      // Every 1,000th address repeats an earlier one (a duplicate item in the answer).
      email: i % 1000 === 999 ? `${tag}-${i - 1}@example.com` : `${tag}-${i}@example.com`,
      name: `Recipient ${i}`,
      metadata: { n: String(i) },
      substitution_data: { first: `R${i}`, items: [1, 2, 3] },
    })),
    content: { subject: 'Big', text: 'Hello {{first}}', html: '<p>Hello {{first}}</p>' },
    options: { tags: ['big'], metadata: { batch: tag } },
  });
}

async function post(body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${baseUrl}/v1/transmissions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return {
    status: res.status,
    body: (await res.json()) as { transmission_id: string; total_accepted_recipients: number },
  };
}

describe('a 10,000-recipient transmission and the event loop', () => {
  it('never blocks the event loop for long, and each accept is still whole and idempotent', async () => {
    // Suppress one recipient so the suppression path runs too.
    await ctx.c.suppressions.upsertPrepared(
      t.tenantId,
      ctx.c.suppressions.prepareItems([{ identifier: 'a-5@example.com', type: 'email', reason_category: 'manual' }]),
      ctx.c.database.db,
    );
    const bodies = ['a', 'b', 'c'].map(bigBody);
    const figures: string[] = [];
    const stretches: number[] = [];
    let firstId = '';
    for (const [i, body] of bodies.entries()) {
      const headers: Record<string, string> = i === 0 ? { 'idempotency-key': 'big-one' } : {};
      const baseline = parseBaselineMs(body);
      const run = await loopBlockedDuring(() => post(body, headers));
      figures.push(`${show(`request ${i + 1}`, run)}, parse ${baseline.toFixed(1)} ms`);
      stretches.push(run.maxCpuMs / baseline);
      expect(run.result.status).toBe(202);
      expect(run.result.body.total_accepted_recipients).toBe(i === 0 ? 9989 : 9990);
      if (i === 0) firstId = run.result.body.transmission_id;
    }
    // Two at once (the group commit may put them in one transaction).
    const pair = [bigBody('d'), bigBody('e')];
    const baseline = parseBaselineMs(pair[0] as string);
    const both = await loopBlockedDuring(() => Promise.all(pair.map((b) => post(b))));
    figures.push(`${show('two at once', both)}, parse ${baseline.toFixed(1)} ms`);
    stretches.push(both.maxCpuMs / baseline);
    console.log(`event loop with 10,000 recipients: ${figures.join('; ')}`);
    const sorted = [...stretches].sort((x, y) => x - y);
    const median = (sorted[1]! + sorted[2]!) / 2;
    const ratios = `ratios ${stretches.map((r) => r.toFixed(1)).join(', ')}`;
    console.log(`event loop with 10,000 recipients: ${ratios}`);
    expect(median, `${ratios}; ${figures.join('; ')}`).toBeLessThan(MAX_STRETCH_RATIO);
    expect(sorted[3], `${ratios}; ${figures.join('; ')}`).toBeLessThan(MAX_SINGLE_STRETCH_RATIO);

    // Durable and whole: every accepted recipient has its row and its event.
    const counts = await sql<{ m: number; e: number }>`select
        (select count(*) from messages where tenant_id = ${t.tenantId}) as m,
        (select count(*) from events where tenant_id = ${t.tenantId} and type = 'message.accepted') as e`.execute(
      ctx.c.database.db,
    );
    expect(Number(counts.rows[0]?.m)).toBe(9990 * 5);
    expect(Number(counts.rows[0]?.e)).toBe(9989 + 9990 * 4);
    // The keyed request replays its answer.
    const again = await post(bodies[0] as string, { 'idempotency-key': 'big-one' });
    expect(again.status).toBe(202);
    expect(again.body.transmission_id).toBe(firstId);
  }, 120_000);
});
