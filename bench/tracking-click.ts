/**
 * npx tsx bench/tracking-click.ts — GET /c/<token> (the click redirect, event written durably
 * through the group commit before the 302) with 64 connections on SQLite, against a bare Fastify
 * 302 redirect in the same run (the ratio is printed); then counts the message.clicked rows to
 * check every 302 was recorded. The clicks go round-robin over the links of MESSAGES messages,
 * so per-message caching is measured with more than one hot key. The tokens are version 2 (a link
 * number looked up in the transmission's link table, what delivered mail carries);
 * BENCH_TOKENS=v1 clicks with URL-carrying version 1 tokens instead (mail sent before them).
 * BENCH_CPU_PROF=<dir> writes a V8 CPU profile of the Postyard process there.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { deriveTokenKey, signToken } from '../src/modules/tracking/token.ts';
import { freePort, machine, spawnNode, stop, table, waitHttp } from './lib.ts';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = 64;
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 200);
const LINKS = 4;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const V1 = process.env.BENCH_TOKENS === 'v1';
const linkUrl = (i: number) => `https://shop.example/sale?item=${i}`;

async function load(url: string, expect: number, paths?: string[]) {
  let i = 0;
  const requests = paths
    ? [
        {
          setupRequest: (req: autocannon.Request) => {
            req.path = paths[i++ % paths.length] ?? '/';
            return req;
          },
        },
      ]
    : undefined;
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, requests });
  const stats = r.statusCodeStats as Record<string, { count?: number }> | undefined;
  const ok = stats?.[String(expect)]?.count ?? 0;
  return {
    rps: Math.round(ok / DURATION),
    p50: r.latency.p50,
    p99: r.latency.p99,
    other: r.non2xx - (expect === 302 ? ok : 0) + r.errors,
    ok,
  };
}

async function main() {
  console.log(
    `machine: ${machine()}; ${CONNECTIONS} connections, ${DURATION} s per run, version ${V1 ? 1 : 2} click tokens`,
  );
  const port = await freePort();
  const bare = spawnNode(['--import', 'tsx', 'bench/bare-fastify.ts'], { PORT: String(port) });
  await waitHttp(`http://127.0.0.1:${port}/healthz`);
  const bareUrl = `http://127.0.0.1:${port}/redirect`;
  await load(bareUrl, 302); // warm-up

  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-'));
  const master = randomBytes(32);
  const httpPort = await freePort();
  const env = {
    POSTYARD_DATA_DIR: dir,
    POSTYARD_HTTP_PORT: String(httpPort),
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_RATE_LIMIT_RPS: '0',
    POSTYARD_DEV_MODE: 'true',
    POSTYARD_MASTER_KEY: master.toString('hex'),
    POSTYARD_TRACKING_RATE_LIMIT_RPS: '10000000',
    POSTYARD_TRACKING_RATE_LIMIT_BURST: '100000000',
  };
  try {
    const out = execFileSync(
      process.execPath,
      ['bin/postyard-src.js', 'tenants', 'create', '--name', 'bench', '--from', 'Bench <bench@example.com>', '--json'],
      {
        env: { ...process.env, ...env },
      },
    ).toString();
    const key = (JSON.parse(out) as { api_key: string }).api_key;
    const prof = process.env.BENCH_CPU_PROF;
    const child = spawnNode(
      [...(prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : []), 'bin/postyard-src.js', 'start', '--roles', 'api'],
      env,
    );
    const url = `http://127.0.0.1:${httpPort}`;
    await waitHttp(`${url}/healthz`);
    const res = await fetch(`${url}/v1/transmissions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        recipients: Array.from({ length: MESSAGES }, (_, i) => ({ email: `r${i}@example.com` })),
        // LINKS distinct links: the transmission's link table has them as rows 0..LINKS-1.
        content: {
          subject: 'x',
          html: Array.from({ length: LINKS }, (_, i) => `<a href="${linkUrl(i)}">${i}</a>`).join(' '),
        },
        options: { mail_type: 'marketing' },
      }),
    });
    const txId = ((await res.json()) as { transmission_id: string }).transmission_id;
    const tx = (await (
      await fetch(`${url}/v1/transmissions/${txId}`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as {
      messages: { id: string }[];
    };
    const tokenKey = deriveTokenKey(master);
    const paths = tx.messages.flatMap((m) =>
      Array.from(
        { length: LINKS },
        (_, link) =>
          `/c/${signToken(tokenKey, { kind: 'click', messageId: m.id, link, ...(V1 ? { url: linkUrl(link) } : { ref: link }) })}`,
      ),
    );
    if (tx.messages.length !== MESSAGES) throw new Error(`expected ${MESSAGES} messages, got ${tx.messages.length}`);
    // People click delivered mail, minutes or days later: mark the messages delivered an hour ago
    // (this role-api server delivers nothing itself).
    const rw = new Database(join(dir, 'postyard.sqlite'));
    rw.pragma('busy_timeout = 5000');
    rw.prepare("update messages set state = 'delivered', updated_at = ? where transmission_id = ?").run(
      new Date(Date.now() - 3_600_000).toISOString(),
      txId,
    );
    rw.close();
    await load(url, 302, paths); // warm-up
    const db0 = new Database(join(dir, 'postyard.sqlite'), { readonly: true });
    const before = (db0.prepare("select count(*) n from events where type = 'message.clicked'").get() as { n: number })
      .n;
    db0.close();
    // Rounds alternate bare and Postyard, so both see the same background load on a shared machine.
    const rows: Record<string, string | number>[] = [];
    const ratios: number[] = [];
    const runs: Awaited<ReturnType<typeof load>>[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const b = await load(bareUrl, 302);
      const r = await load(url, 302, paths);
      runs.push(r);
      ratios.push(r.rps / b.rps);
      rows.push({ round, 'bare 302 req/s': b.rps, 'postyard /c req/s': r.rps, 'p50 ms': r.p50, 'p99 ms': r.p99 });
    }
    await stop(child);
    await stop(bare);
    const db = new Database(join(dir, 'postyard.sqlite'), { readonly: true });
    const after = (db.prepare("select count(*) n from events where type = 'message.clicked'").get() as { n: number }).n;
    db.close();
    console.log(table(rows));
    const ok = runs.reduce((n, r) => n + r.ok, 0);
    const other = runs.reduce((n, r) => n + r.other, 0);
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    console.log(
      `302 answers: ${ok}; message.clicked rows written meanwhile: ${after - before}; other answers/errors: ${other}`,
    );
    console.log(
      `median postyard: ${med(runs.map((r) => r.rps))} redirects/s (target >= 5,000); median ratio postyard / bare (same run): ${med(ratios).toFixed(3)}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
