/**
 * npm run bench:webhooks — webhook delivery throughput and events API latency, on SQLite and
 * (when BENCH_DATABASE_URL or DATABASE_URL is set) PostgreSQL.
 *
 * 1. Delivery: a backlog of events (single: BENCH_SINGLE_EVENTS, batch: BENCH_BATCH_EVENTS) is
 *    written the way the app writes them (events + outbox), then the production dispatcher drains
 *    it to a receiver in its own process; events/s = events received / time. In the same run a
 *    raw undici client posts the same bodies, signed the same way, with the same concurrency.
 *    The measured runs alternate the two in BENCH_ROUNDS rounds (default 3).
 * 2. Events API: BENCH_API_EVENTS events (default 1,000,000) for one tenant, inserted in bulk,
 *    then GET /v1/events over HTTP with each filter, one request at a time: p50/p99 per query.
 *    On PostgreSQL the plans of the main queries are printed (EXPLAIN ANALYZE).
 * Sizes: BENCH_SINGLE_EVENTS, BENCH_BATCH_EVENTS, BENCH_API_EVENTS (0 skips a part);
 * BENCH_SKIP_SQLITE=1 runs PostgreSQL only. BENCH_PROFILE_DIR=<dir> writes a CPU profile of each
 * measured dispatcher phase only (not the seeding or the raw client) into that directory.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery } from 'kysely';
import { Agent } from 'undici';
import { v7 as uuidv7 } from 'uuid';
import { loadConfig } from '../src/config.ts';
import { type Container, createContainer } from '../src/container.ts';
import { insertMany } from '../src/db/batch.ts';
import type { EventsTable, EventTagsTable } from '../src/db/schema.ts';
import { buildApp } from '../src/app.ts';
import { newId } from '../src/lib/ids.ts';
import { createLogger } from '../src/logger.ts';
import { eventJson, insertEvents } from '../src/modules/events/events.repo.ts';
import { type EventFilter, listEventsQuery } from '../src/modules/events/events.query.ts';
import type { EventType, NewEvent } from '../src/modules/events/events.types.ts';
import { WebhookDispatcher } from '../src/modules/webhooks/dispatcher.ts';
import { secretKey, signatureHeader } from '../src/modules/webhooks/sender.ts';
import { freePort, freshPgSchema, machine, spawnNode, stop, table, waitHttp } from './lib.ts';

const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';
const N_SINGLE = Number(process.env.BENCH_SINGLE_EVENTS ?? 30_000);
const N_BATCH = Number(process.env.BENCH_BATCH_EVENTS ?? 300_000);
const N_API = Number(process.env.BENCH_API_EVENTS ?? 1_000_000);
const SAMPLES = Number(process.env.BENCH_API_SAMPLES ?? 200);
// The dispatcher's defaults, used by the raw client too.
const SINGLE_CONCURRENCY = 16;
const BATCH_CONCURRENCY = 4;
const BATCH_SIZE = 100;
/** Measured runs alternate dispatcher and raw client this many times (see delivery()). */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));

const PROFILE_DIR = process.env.BENCH_PROFILE_DIR ?? '';

/** Starts a CPU profile of this process; the returned function stops it and writes `<name>.cpuprofile`. */
async function profile(name: string): Promise<() => Promise<void>> {
  if (!PROFILE_DIR) return async () => {};
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return async () => {
    const { profile: p } = await session.post('Profiler.stop');
    mkdirSync(PROFILE_DIR, { recursive: true });
    writeFileSync(join(PROFILE_DIR, `${name}.cpuprofile`), JSON.stringify(p));
    session.disconnect();
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function stats(rx: string): Promise<{ requests: number; events: number }> {
  return (await fetch(`${rx}/stats`)).json() as Promise<{ requests: number; events: number }>;
}

function event(tenantId: string, i: number): NewEvent {
  return {
    tenantId,
    type: 'message.delivered',
    transmissionId: newId(),
    messageId: newId(),
    recipient: `user${i}@example.com`,
    mailType: 'transactional',
    tags: ['receipt'],
    metadata: { order: String(i) },
    data: { mx_host: 'mx.example.com', smtp_response: '250 2.0.0 OK queued as ABC123', tls: true, attempt: 1 },
  };
}

/**
 * Dispatcher drain rate for one policy, and the raw client's rate on the same bodies. The events
 * go in ROUNDS rounds that alternate between the two (dispatcher drains a backlog of n/ROUNDS
 * events, then the raw client posts those same events' bodies), so load swings on a shared
 * machine hit both sides alike; rates are total events / total time of each side. CPU time of
 * this process per event is reported for both sides too (the dispatcher's includes SQLite, which
 * runs in-process; PostgreSQL's server CPU is not in it).
 */
async function delivery(c: Container, rx: string, policy: 'single' | 'batch', n: number, profName = '') {
  const db = c.database.db;
  const tenant = await c.tenants.create({ name: `bench-${policy}` });
  await db.updateTable('webhooks').set({ enabled: 0, status: 'disabled' }).execute();
  const hook = await c.webhooks.create(tenant.tenant_id, {
    url: `${rx}/hook`,
    dispatch_policy: policy,
    batch_max_size: BATCH_SIZE,
    batch_max_wait_ms: 200,
  });
  const key = secretKey(hook.secret ?? '');
  const agent = new Agent({ connections: 32 });
  const origin = new URL(rx).origin;
  const rounds = profName ? ROUNDS : 1;
  const t = { secs: 0, drained: 0, cpuUs: 0, rawSecs: 0, rawCpuUs: 0 };
  for (let round = 0, done = 0; round < rounds; round++) {
    const m = Math.round((n * (round + 1)) / rounds) - done;
    done += m;
    const rows: EventsTable[] = [];
    for (let i = 0; i < m; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, m - i) }, (_, j) => event(tenant.tenant_id, i + j));
      rows.push(...(await db.transaction().execute((trx) => insertEvents(trx, chunk))));
    }
    await fetch(`${rx}/reset`, { method: 'POST' });
    const d = new WebhookDispatcher(c.database, c.webhooks.registry, c.webhooks.sender, c.logger, {
      nodeId: `bench-${policy}`,
    });
    const endProfile = profName ? await profile(`${profName}-r${round + 1}`) : async () => {};
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    d.start();
    let got = 0;
    while (got < m) {
      await sleep(20);
      got = (await stats(rx)).events;
      if (performance.now() - t0 > 600_000) throw new Error(`${policy}: only ${got}/${m} events after 10 min`);
    }
    t.secs += (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    t.cpuUs += cpu.user + cpu.system;
    while ((await db.selectFrom('webhook_queue').select('id').limit(1).execute()).length) await sleep(20);
    t.drained += (performance.now() - t0) / 1000;
    await endProfile();
    await d.stop();

    // The raw client: the same bodies and signatures, the same concurrency, no database.
    const bodies: { id: string; body: string; events: number }[] = [];
    if (policy === 'single') for (const r of rows) bodies.push({ id: r.id, body: eventJson(r), events: 1 });
    else {
      for (let i = 0; i < rows.length; i += BATCH_SIZE) {
        const id = newId();
        const part = rows.slice(i, i + BATCH_SIZE);
        bodies.push({
          id,
          body: `{"batch_id":"${id}","events":[${part.map(eventJson).join(',')}]}`,
          events: part.length,
        });
      }
    }
    await fetch(`${rx}/reset`, { method: 'POST' });
    let next = 0;
    const rawCpu0 = process.cpuUsage();
    const r0 = performance.now();
    const worker = async () => {
      while (next < bodies.length) {
        const b = bodies[next++] as (typeof bodies)[number];
        const ts = Math.floor(Date.now() / 1000);
        const res = await agent.request({
          origin,
          path: '/hook',
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'webhook-id': b.id,
            'webhook-timestamp': String(ts),
            'webhook-signature': signatureHeader([key], b.id, ts, b.body),
          },
          body: b.body,
        });
        await res.body.dump();
      }
    };
    await Promise.all(Array.from({ length: policy === 'single' ? SINGLE_CONCURRENCY : BATCH_CONCURRENCY }, worker));
    t.rawSecs += (performance.now() - r0) / 1000;
    const rawCpu = process.cpuUsage(rawCpu0);
    t.rawCpuUs += rawCpu.user + rawCpu.system;
    const check = await stats(rx);
    if (check.events !== m) throw new Error(`raw client: receiver counted ${check.events}/${m}`);
  }
  await agent.close();
  await c.webhooks.delete(tenant.tenant_id, hook.id);
  return {
    rate: n / t.secs,
    drainedRate: n / t.drained,
    raw: n / t.rawSecs,
    cpuUsPerEvent: t.cpuUs / n,
    rawCpuUsPerEvent: t.rawCpuUs / n,
  };
}

const TYPES: [EventType, number][] = [
  ['message.accepted', 0.35],
  ['message.delivered', 0.33],
  ['message.opened', 0.15],
  ['message.clicked', 0.08],
  ['message.bounced', 0.03],
  ['message.deferred', 0.03],
  ['message.failed', 0.01],
  ['message.suppressed', 0.01],
  ['message.complained', 0.005],
  ['message.unsubscribed', 0.005],
];

function pickType(r: number): EventType {
  let acc = 0;
  for (const [t, p] of TYPES) if ((acc += p) > r) return t;
  return 'message.accepted';
}

/** Bulk-inserts `n` events spread over the last 29 days, ids matching their time (UUIDv7). */
async function seedEvents(c: Container, tenantId: string, n: number) {
  const now = Date.now();
  const span = 29 * 86_400_000;
  const transmissions = Array.from({ length: Math.max(1, Math.floor(n / 10)) }, () => newId());
  const CHUNK = 20_000;
  for (let i = 0; i < n; i += CHUNK) {
    const events: EventsTable[] = [];
    const tags: EventTagsTable[] = [];
    for (let j = i; j < Math.min(n, i + CHUNK); j++) {
      const ms = now - span + Math.floor((span * j) / n);
      const id = uuidv7({ msecs: ms });
      const r = Math.random();
      const t: string[] = r < 0.3 ? ['welcome'] : r < 0.31 ? ['rare-tag'] : [];
      events.push({
        tenant_id: tenantId,
        id,
        type: pickType(Math.random()),
        created_at: new Date(ms).toISOString(),
        transmission_id: transmissions[j % transmissions.length] as string,
        message_id: newId(),
        recipient: `user${j % 100_000}@example.com`,
        mail_type: 'transactional',
        tags: JSON.stringify(t),
        metadata: '{"order":"42"}',
        data: '{"mx_host":"mx.example.com","smtp_response":"250 ok","tls":true,"attempt":1}',
      });
      for (const tag of t) tags.push({ tenant_id: tenantId, tag, event_id: id });
    }
    await c.database.db.transaction().execute(async (trx) => {
      await insertMany(trx, 'events', events);
      await insertMany(trx, 'event_tags', tags);
    });
  }
  return { transmissions, now, span };
}

function pct(xs: number[], p: number) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

async function eventsApi(c: Container, label: string) {
  const tenant = await c.tenants.create({ name: 'bench-events' });
  const other = await c.tenants.create({ name: 'bench-other' });
  const t0 = performance.now();
  const seeded = await seedEvents(c, tenant.tenant_id, N_API);
  await seedEvents(c, other.tenant_id, Math.floor(N_API / 10));
  if (c.database.dialect === 'postgres') await c.database.db.executeQuery(CompiledQuery.raw('ANALYZE'));
  console.log(
    `${label}: inserted ${N_API + Math.floor(N_API / 10)} events in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );

  const app = await buildApp(c);
  const port = await freePort();
  await app.listen({ port, host: '127.0.0.1' });
  const agent = new Agent({ connections: 1 });
  const get = async (query: Record<string, string>) => {
    const qs = new URLSearchParams(query).toString();
    const s = performance.now();
    const res = await agent.request({
      origin: `http://127.0.0.1:${port}`,
      path: `/v1/events?${qs}`,
      method: 'GET',
      headers: { authorization: `Bearer ${tenant.api_key}` },
    });
    const body = (await res.body.json()) as { data: unknown[]; next_cursor: string | null };
    if (res.statusCode !== 200) throw new Error(`GET /v1/events?${qs}: ${res.statusCode} ${JSON.stringify(body)}`);
    return { ms: performance.now() - s, body };
  };
  const rand = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)] as T;
  const hour = () => {
    const from = seeded.now - seeded.span + Math.random() * (seeded.span - 3600_000);
    return { from: new Date(from).toISOString(), to: new Date(from + 3600_000).toISOString() };
  };
  const kinds: [string, () => Record<string, string>][] = [
    ['newest page', () => ({})],
    ['type (3 %)', () => ({ type: 'message.bounced' })],
    ['two rare types', () => ({ type: 'message.complained,message.unsubscribed' })],
    ['recipient', () => ({ recipient: `user${Math.floor(Math.random() * 100_000)}@example.com` })],
    ['transmission_id', () => ({ transmission_id: rand(seeded.transmissions) })],
    ['tag (30 %)', () => ({ tag: 'welcome' })],
    ['tag (1 %)', () => ({ tag: 'rare-tag' })],
    ['1-hour window', hour],
    ['type + window', () => ({ type: 'message.delivered', ...hour() })],
  ];
  for (const [, q] of kinds) await get(q()); // warm-up
  const rows: Record<string, string | number>[] = [];
  const all: number[] = [];
  for (const [name, q] of kinds) {
    const ms: number[] = [];
    for (let i = 0; i < SAMPLES; i++) ms.push((await get(q())).ms);
    all.push(...ms);
    rows.push({ query: name, p50_ms: pct(ms, 50), p99_ms: pct(ms, 99) });
  }
  // Deep paging: 100 pages of 50 following next_cursor.
  const deep: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const r = await get(cursor ? { cursor } : {});
    deep.push(r.ms);
    cursor = r.body.next_cursor;
  }
  all.push(...deep);
  rows.push({ query: '100 pages via cursor', p50_ms: pct(deep, 50), p99_ms: pct(deep, 99) });
  const big: number[] = [];
  for (let i = 0; i < 50; i++) big.push((await get({ limit: '1000' })).ms);
  rows.push({ query: 'limit=1000 (not in total)', p50_ms: pct(big, 50), p99_ms: pct(big, 99) });
  rows.push({ query: 'ALL (limit 50)', p50_ms: pct(all, 50), p99_ms: pct(all, 99) });
  await agent.close();
  await app.close();
  console.log(`\n${label}: GET /v1/events on ${N_API} events of one tenant (HTTP, one request at a time)`);
  console.log(table(rows));
  if (c.database.dialect === 'postgres') await explain(c, tenant.tenant_id, seeded.transmissions[0] as string, hour());
  return pct(all, 99);
}

async function explain(c: Container, tenantId: string, transmissionId: string, window: { from: string; to: string }) {
  const base: EventFilter = { limit: 50, types: [] };
  const plans: [string, EventFilter][] = [
    ['newest page', base],
    ['type', { ...base, types: ['message.bounced'] }],
    ['two types', { ...base, types: ['message.complained', 'message.unsubscribed'] }],
    ['recipient', { ...base, recipient: 'user42@example.com' }],
    ['transmission_id', { ...base, transmissionId }],
    ['tag', { ...base, tag: 'rare-tag' }],
    ['1-hour window', { ...base, ...window }],
  ];
  for (const [name, f] of plans) {
    const q = listEventsQuery(c.database.db, tenantId, f).compile();
    const res = await c.database.db.executeQuery<{ 'QUERY PLAN': string }>(
      CompiledQuery.raw(`EXPLAIN (ANALYZE, BUFFERS) ${q.sql}`, [...q.parameters]),
    );
    console.log(`\n-- EXPLAIN ${name}\n${res.rows.map((r) => r['QUERY PLAN']).join('\n')}`);
  }
}

async function run(label: string, env: Record<string, string>, rx: string) {
  const config = loadConfig({
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS: 'true',
    POSTYARD_RATE_LIMIT_RPS: '0',
    ...env,
  });
  const c = await createContainer(config, createLogger('warn'));
  const none = {
    rate: Number.NaN,
    drainedRate: Number.NaN,
    raw: Number.NaN,
    cpuUsPerEvent: Number.NaN,
    rawCpuUsPerEvent: Number.NaN,
  };
  try {
    // Warm-up (JIT, SQLite page cache, connections); its figures are discarded.
    if (N_SINGLE > 0) await delivery(c, rx, 'single', 3000);
    if (N_BATCH > 0) await delivery(c, rx, 'batch', 20_000);
    const single = N_SINGLE > 0 ? await delivery(c, rx, 'single', N_SINGLE, `${label}-single`) : none;
    const batch = N_BATCH > 0 ? await delivery(c, rx, 'batch', N_BATCH, `${label}-batch`) : none;
    const p99 = N_API > 0 ? await eventsApi(c, label) : Number.NaN;
    return { single, batch, p99 };
  } finally {
    await c.close();
  }
}

async function main() {
  console.log(`machine: ${machine()}`);
  const port = await freePort();
  const receiver = spawnNode(['--import', 'tsx', 'bench/webhook-receiver.ts'], { PORT: String(port) });
  const rx = `http://127.0.0.1:${port}`;
  await waitHttp(`${rx}/stats`);
  const results: Record<string, string | number>[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-wh-'));
  const add = (label: string, r: Awaited<ReturnType<typeof run>>) => {
    for (const [policy, x, target] of [
      ['single', r.single, 2000],
      ['batch', r.batch, 20000],
    ] as const) {
      results.push({
        backend: label,
        policy,
        events_per_s: Math.round(x.rate),
        incl_outcome_writes: Math.round(x.drainedRate),
        raw_undici: Math.round(x.raw),
        ratio: x.rate / x.raw,
        cpu_us_per_event: `${x.cpuUsPerEvent.toFixed(1)} / ${x.rawCpuUsPerEvent.toFixed(1)}`,
        target: `>= ${target}, >= 0.5 raw`,
      });
    }
    results.push({
      backend: label,
      policy: 'GET /v1/events p99 ms',
      events_per_s: Number(r.p99.toFixed(1)),
      incl_outcome_writes: '',
      raw_undici: '',
      ratio: '',
      cpu_us_per_event: '',
      target: '< 50',
    });
  };
  try {
    if (process.env.BENCH_SKIP_SQLITE !== '1') add('sqlite', await run('sqlite', { POSTYARD_DATA_DIR: dir }, rx));
    if (PG_URL) {
      const s = await freshPgSchema(PG_URL);
      try {
        add('postgres', await run('postgres', { POSTYARD_DATA_DIR: dir, DATABASE_URL: s.url }, rx));
      } finally {
        await s.drop();
      }
    }
  } finally {
    await stop(receiver);
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\nsingle: ${N_SINGLE} events, ${SINGLE_CONCURRENCY} in flight; batch: ${N_BATCH} events, ${BATCH_SIZE} per POST, ${BATCH_CONCURRENCY} in flight; ` +
      `${ROUNDS} rounds alternating dispatcher and raw client; cpu_us_per_event = this process, dispatcher / raw`,
  );
  console.log(table(results));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
