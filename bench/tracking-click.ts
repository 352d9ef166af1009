/**
 * npx tsx bench/tracking-click.ts — GET /c/<token> (the click redirect, event written durably
 * through the group commit before the 302) with 64 connections on SQLite, against a bare Fastify
 * route in the same run; then counts the message.clicked rows to check every 302 was recorded.
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

async function load(url: string, expect: number) {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION });
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
  console.log(`machine: ${machine()}; ${CONNECTIONS} connections, ${DURATION} s per run`);
  const port = await freePort();
  const bare = spawnNode(['--import', 'tsx', 'bench/bare-fastify.ts'], { PORT: String(port) });
  await waitHttp(`http://127.0.0.1:${port}/healthz`);
  await load(`http://127.0.0.1:${port}/healthz`, 200);
  const baseline = await load(`http://127.0.0.1:${port}/healthz`, 200);
  await stop(bare);

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
      ['bin/postyard.js', 'tenants', 'create', '--name', 'bench', '--from', 'Bench <bench@example.com>', '--json'],
      {
        env: { ...process.env, ...env },
      },
    ).toString();
    const key = (JSON.parse(out) as { api_key: string }).api_key;
    const child = spawnNode(['bin/postyard.js', 'start', '--roles', 'api'], env);
    const url = `http://127.0.0.1:${httpPort}`;
    await waitHttp(`${url}/healthz`);
    const res = await fetch(`${url}/v1/transmissions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        recipients: [{ email: 'ann@example.com' }],
        content: { subject: 'x', html: '<a href="https://shop.example/">x</a>' },
        options: { mail_type: 'marketing' },
      }),
    });
    const txId = ((await res.json()) as { transmission_id: string }).transmission_id;
    const tx = (await (
      await fetch(`${url}/v1/transmissions/${txId}`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as {
      messages: { id: string }[];
    };
    const messageId = tx.messages[0]?.id ?? '';
    const token = signToken(deriveTokenKey(master), {
      kind: 'click',
      messageId,
      link: 0,
      url: 'https://shop.example/sale?x=1',
    });
    await load(`${url}/c/${token}`, 302); // warm-up
    const db0 = new Database(join(dir, 'postyard.sqlite'), { readonly: true });
    const before = (db0.prepare("select count(*) n from events where type = 'message.clicked'").get() as { n: number })
      .n;
    db0.close();
    const r = await load(`${url}/c/${token}`, 302);
    await stop(child);
    const db = new Database(join(dir, 'postyard.sqlite'), { readonly: true });
    const after = (db.prepare("select count(*) n from events where type = 'message.clicked'").get() as { n: number }).n;
    db.close();
    console.log(
      table([
        { run: 'bare fastify GET', 'req/s': baseline.rps, 'p50 ms': baseline.p50, 'p99 ms': baseline.p99 },
        { run: 'postyard GET /c (sqlite)', 'req/s': r.rps, 'p50 ms': r.p50, 'p99 ms': r.p99 },
      ]),
    );
    console.log(
      `302 answers: ${r.ok}; message.clicked rows written in the run: ${after - before}; other answers/errors: ${r.other}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
