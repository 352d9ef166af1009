/**
 * Real Postyard nodes (`postyard start --roles ...` child processes) sharing the database of a
 * test context, for the multi-node (test/cluster) and crash (test/crash) tests, plus the counting
 * helpers those tests share. Every node listens on a free port of 127.0.0.1 (so every node has
 * the api role: /healthz tells that it is up); mail goes to a sink MX found through a DNS server on
 * loopback. On PostgreSQL the node's DATABASE_URL carries the context's schema as search_path.
 */
import { TEST_DATABASE_URL, type TestContext } from './context.ts';
import { type ServerProcess, SPAWN_TIMEOUT_MS, startServer } from './server-process.ts';
import type { SinkMx } from '../peers/sink-mx.ts';

export interface Node extends ServerProcess {
  name: string;
  roles: string;
  /** The node run's claim-holder id is `<node id>:<pid>:<random>` (src/lib/node-identity.ts). */
  holderPattern: string;
}

/** DATABASE_URL for a child process that must use the context's PostgreSQL schema. */
export function databaseUrlFor(ctx: TestContext): string | null {
  if (!TEST_DATABASE_URL) return null;
  const u = new URL(TEST_DATABASE_URL);
  if (ctx.pgSchema) u.searchParams.set('options', `-c search_path=${ctx.pgSchema}`);
  return u.toString();
}

/** The environment of a node sharing `ctx`'s database and master key. */
export function nodeEnv(ctx: TestContext, extra: Record<string, string> = {}): Record<string, string> {
  const url = databaseUrlFor(ctx);
  return {
    ...ctx.env,
    POSTYARD_DATA_DIR: ctx.dataDir,
    POSTYARD_MASTER_KEY: ctx.c.masterKey.toString('hex'),
    POSTYARD_LOG_LEVEL: 'warn',
    ...(url ? { DATABASE_URL: url } : {}),
    ...extra,
  };
}

/** Starts one node; `roles` must include api (readiness is GET /healthz). */
export async function startNode(
  ctx: TestContext,
  name: string,
  roles: string,
  extra: Record<string, string> = {},
): Promise<Node> {
  if (!roles.split(',').includes('api')) throw new Error('a test node needs the api role (for /healthz)');
  const server = await startServer(['--roles', roles], {
    env: nodeEnv(ctx, { POSTYARD_EHLO_NAME: `${name}.nodes.test`, ...extra }),
    timeoutMs: SPAWN_TIMEOUT_MS,
  });
  return Object.assign(server, { name, roles, holderPattern: `%:${server.child.pid}:%` });
}

/** Kills a node with SIGKILL (no shutdown code runs) and waits for the exit. */
export async function kill9(node: Node): Promise<void> {
  const r = await node.stop('SIGKILL', 10_000);
  if (r.signal !== 'SIGKILL') throw new Error(`${node.name} was not killed by SIGKILL: ${JSON.stringify(r)}`);
}

/** Lines a node logged at error level or above (pino level >= 50), for the test output. */
export function errorLines(node: ServerProcess): string[] {
  return node
    .stdout()
    .split('\n')
    .filter((l) => /"level":(5|6)\d/.test(l))
    .map((l) => l.slice(0, 400));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` until it is true; on timeout throws with `what()` (the state seen last). */
export async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: () => string | Promise<string>,
  everyMs = 100,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`not reached within ${timeoutMs} ms: ${await what()}`);
    await sleep(everyMs);
  }
}

/** How many times each Postyard message id reached the sink (from the Message-ID header). */
export function messageIdsAtSink(sink: SinkMx, from = 0): Map<string, number> {
  const seen = new Map<string, number>();
  for (let i = from; i < sink.messages.length; i++) {
    const m = sink.messages[i];
    if (!m) continue;
    const head = m.raw.subarray(0, 4096).toString('latin1');
    const id = /^Message-ID:\s*<([^@>]+)@/im.exec(head)?.[1];
    if (!id) throw new Error(`sink: a message without a Postyard Message-ID: ${head.slice(0, 200)}`);
    seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  return seen;
}

/** Sum over keys of (count - 1): extra copies beyond the first. */
export function extraCopies(counts: Map<string, number>): number {
  let n = 0;
  for (const v of counts.values()) n += v - 1;
  return n;
}

/** How many times each event id reached a webhook endpoint (single bodies and batches alike). */
export function eventCounts(bodies: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const body of bodies) {
    const parsed = JSON.parse(body) as { id: string } | { events: { id: string }[] };
    for (const e of 'events' in parsed ? parsed.events : [parsed]) counts.set(e.id, (counts.get(e.id) ?? 0) + 1);
  }
  return counts;
}

export interface PostResult {
  status: number | null;
  body: Record<string, unknown> | null;
  error: string | null;
}

/** POST/GET with a bearer key over real HTTP; a network failure is a result, not a throw. */
export async function request(
  baseUrl: string,
  method: 'GET' | 'POST',
  path: string,
  key: string,
  body?: unknown,
): Promise<PostResult> {
  try {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : null, error: null };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { status: null, body: null, error: cause?.code ?? cause?.message ?? String(err) };
  }
}

/** Runs `fn` over `items` with at most `n` in flight; results in input order. */
export async function inPool<T, R>(
  items: readonly T[],
  n: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const runners = Array.from({ length: Math.min(n, items.length) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i] as T, i);
    }
  });
  await Promise.all(runners);
  return out;
}
