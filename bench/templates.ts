/**
 * npm run bench:templates — the cost of the template language (docs/templates.md), each figure
 * against its baseline in the same run, on SQLite and (with BENCH_DATABASE_URL or DATABASE_URL)
 * PostgreSQL:
 * (a) accepting one 10,000-recipient transmission by `template_id` with per-recipient data, against
 *     the same recipients and data with inline text (the API over HTTP; median of 5, alternating);
 * (b) delivering 20,000 messages rendered from a template with per-recipient data, against the
 *     same 20,000 messages with one shared body (the cached fast path), DKIM (RSA-2048) on both,
 *     render threads on (the default), to a local sink.
 */
import { execFileSync, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.ts';
import { createContainer } from '../src/container.ts';
import { createLogger } from '../src/logger.ts';
import { dkimDnsRecordValue, generateDkimKeyPair } from '../src/modules/delivery/render/dkim.ts';
import { validateTransmission } from '../src/modules/transmissions/transmissions.validate.ts';
import { startDnsServer } from '../test/peers/dns-server.ts';
import {
  countMessages,
  freePort,
  freshPgSchema,
  machine,
  spawnNode,
  stop,
  table,
  waitForDelivery,
  waitHttp,
} from './lib.ts';

const N = Number(process.env.BENCH_MESSAGES ?? 20_000);
const ACCEPT_RECIPIENTS = 10_000;
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? '';
const keys = generateDkimKeyPair();

const PARA = 'Thanks for your order. Your receipt is below.';
const TEXT = `${PARA}\n`.repeat(20);
const HTML = `<html><body>${`<p>${PARA}</p>`.repeat(20)}</body></html>`;
/** The same message as a template: a greeting, the order number and a list per recipient. */
const TEMPLATE = {
  subject: 'Receipt {{order}} for {{first}}',
  text: `Hi {{first}},\n${TEXT}{{#each items}}- {{this}}\n{{/each}}`,
  html: `<html><body><p>Hi {{first}},</p>${`<p>${PARA}</p>`.repeat(20)}<ul>{{#each items}}<li>{{this}}</li>{{/each}}</ul></body></html>`,
};
const dataOf = (i: number) => ({ first: `Name${i}`, order: `A-${i}`, items: ['tea', 'cake', `item ${i}`] });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

// ---- (a) accept -----------------------------------------------------------------------------

async function accept(label: string, env: Record<string, string>) {
  const port = await freePort();
  const fullEnv = {
    ...env,
    POSTYARD_HTTP_PORT: String(port),
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_RATE_LIMIT_RPS: '0',
    POSTYARD_DEV_MODE: 'true',
  };
  const out = execFileSync(
    process.execPath,
    ['bin/postyard-src.js', 'tenants', 'create', '--name', 'bench', '--from', 'Bench <bench@example.com>', '--json'],
    { env: { ...process.env, ...fullEnv } },
  ).toString();
  const key = (JSON.parse(out) as { api_key: string }).api_key;
  const child = spawnNode(['bin/postyard-src.js', 'start', '--roles', 'api'], fullEnv);
  const url = `http://127.0.0.1:${port}`;
  const post = async (path: string, body: string) => {
    const t0 = performance.now();
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body,
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${path} answered ${res.status}: ${text.slice(0, 300)}`);
    return { ms: performance.now() - t0, json: JSON.parse(text) as { id?: string } };
  };
  try {
    await waitHttp(`${url}/healthz`);
    const tpl = await post('/v1/templates', JSON.stringify({ name: 'receipt', ...TEMPLATE }));
    await post(`/v1/templates/${tpl.json.id}/publish`, '{}');
    const recipients = Array.from({ length: ACCEPT_RECIPIENTS }, (_, i) => ({
      email: `r${i}@example.com`,
      substitution_data: dataOf(i),
    }));
    const inline = JSON.stringify({ recipients, content: { subject: 'Receipt', text: TEXT } });
    const byTemplate = JSON.stringify({ recipients, content: { template_id: tpl.json.id } });
    // Warm-up of both (JIT, caches), then alternating runs.
    await post('/v1/transmissions', inline);
    await post('/v1/transmissions', byTemplate);
    const inlineMs: number[] = [];
    const templateMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      inlineMs.push((await post('/v1/transmissions', inline)).ms);
      templateMs.push((await post('/v1/transmissions', byTemplate)).ms);
    }
    return { label, inline: median(inlineMs), template: median(templateMs) };
  } finally {
    await stop(child);
  }
}

// ---- (b) delivery ---------------------------------------------------------------------------

async function startSink() {
  const port = await freePort();
  const child = fork('bench/sink-server.ts', {
    env: { ...process.env, PORT: String(port) },
    execArgv: ['--import', 'tsx'],
  });
  await new Promise((r) => child.once('message', r));
  return { port, close: () => stop(child) };
}

async function deliver(
  label: string,
  dbEnv: Record<string, string>,
  sinkPort: number,
  dns: string,
  templated: boolean,
) {
  const env = {
    ...dbEnv,
    POSTYARD_LOG_LEVEL: 'warn',
    POSTYARD_DEV_MODE: 'true',
    POSTYARD_DNS_SERVERS: dns,
    POSTYARD_MX_PORT: String(sinkPort),
    POSTYARD_EHLO_NAME: 'bench.postyard.test',
  };
  const config = loadConfig({ ...process.env, ...env });
  const c = await createContainer(config, createLogger('warn'));
  const tenant = await c.tenants.create({ name: 'bench', from: 'Shop <shop@bench.test>' });
  // A sending domain gives the worker its RSA-2048 DKIM key (dev mode signs with a pending domain).
  await c.domains.create(tenant.tenant_id, await c.domains.prepare(tenant.tenant_id, { domain: 'bench.test' }));
  let template: Awaited<ReturnType<typeof c.templates.forSend>> | undefined;
  if (templated) {
    const prepared = await c.templates.prepareCreate({ name: 'receipt', ...TEMPLATE });
    const t = await c.database.db
      .transaction()
      .execute((trx) => c.templates.insertPrepared(trx, tenant.tenant_id, prepared));
    await c.templates.publish(tenant.tenant_id, t.id);
    template = await c.templates.forSend(tenant.tenant_id, t.id, false);
  }
  // Queued through the real accept path, 10,000 recipients per transmission.
  for (let start = 0; start < N; start += 10_000) {
    const recipients = Array.from({ length: Math.min(10_000, N - start) }, (_, i) => ({
      email: `r${start + i}@dest.test`,
      ...(templated ? { substitution_data: dataOf(start + i) } : {}),
    }));
    const body = templated
      ? { recipients, content: { template_id: template?.templateId } }
      : { recipients, content: { subject: 'Receipt', text: TEXT, html: HTML } };
    const input = await validateTransmission(body as never, 'Shop <shop@bench.test>', undefined, template);
    await c.database.db.transaction().execute((trx) => c.transmissions.accept(trx, tenant.tenant_id, input));
  }
  await c.close();
  const t0 = performance.now();
  const child = spawnNode(['bin/postyard-src.js', 'start', '--roles', 'worker'], { ...env });
  const check = await createContainer(config, createLogger('warn'));
  try {
    // The clock starts at the worker's first claim (as in bench/deliver.ts).
    const { firstClaimAt: tClaim } = await waitForDelivery(check, N, t0, ['delivered', 'failed']);
    const failed = await countMessages(check, ['failed']);
    if (failed > 0) throw new Error(`${failed} messages failed`);
    return { label, rate: N / ((performance.now() - tClaim) / 1000) };
  } finally {
    await stop(child);
    await check.close();
  }
}

async function backends(run: (label: string, env: Record<string, string>, dir: string) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'postyard-bench-templates-'));
  try {
    if (!process.env.BENCH_SKIP_SQLITE) {
      const sub = mkdtempSync(join(dir, 'sqlite-'));
      await run('sqlite', { POSTYARD_DATA_DIR: sub }, sub);
    }
    if (PG_URL) {
      const s = await freshPgSchema(PG_URL);
      try {
        await run('postgres', { POSTYARD_DATA_DIR: dir, DATABASE_URL: s.url }, dir);
      } finally {
        await s.drop();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  console.log(`machine: ${machine()}; accept ${ACCEPT_RECIPIENTS} recipients; deliver ${N} messages, RSA-2048 DKIM`);
  const acceptRows: Awaited<ReturnType<typeof accept>>[] = [];
  await backends(async (label, env) => {
    acceptRows.push(await accept(label, env));
  });
  console.log(
    table(
      acceptRows.map((r) => ({
        target: `accept ${r.label}`,
        'inline text ms (baseline)': Math.round(r.inline),
        'template_id ms': Math.round(r.template),
        ratio: r.template / r.inline,
      })),
    ),
  );
  console.log('target: template_id within 1.5x of inline text (ratio <= 1.5)');

  const dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx.dest.test' }] },
    'mx.dest.test': { A: ['127.0.0.1'] },
    's1._domainkey.bench.test': { TXT: [dkimDnsRecordValue(keys.publicKeyBase64).match(/.{1,255}/g) ?? []] },
  });
  const sink = await startSink();
  const deliverRows: { label: string; shared: number; templated: number }[] = [];
  try {
    await backends(async (label, env, dir) => {
      const shared = await deliver(
        label,
        { ...env, POSTYARD_DATA_DIR: mkdtempSync(join(dir, 'a-')) },
        sink.port,
        dnsServer.address,
        false,
      );
      const pg = env.DATABASE_URL ? await freshPgSchema(PG_URL) : null;
      try {
        const templated = await deliver(
          label,
          { ...env, ...(pg ? { DATABASE_URL: pg.url } : {}), POSTYARD_DATA_DIR: mkdtempSync(join(dir, 'b-')) },
          sink.port,
          dnsServer.address,
          true,
        );
        deliverRows.push({ label, shared: shared.rate, templated: templated.rate });
      } finally {
        await pg?.drop();
      }
    });
  } finally {
    await sink.close();
    await dnsServer.close();
  }
  console.log(
    table(
      deliverRows.map((r) => ({
        target: `deliver ${r.label}`,
        'shared body msgs/s (baseline)': Math.round(r.shared),
        'template + per-recipient data msgs/s': Math.round(r.templated),
        ratio: r.templated / r.shared,
      })),
    ),
  );
  console.log('target: templated delivery >= 0.8 of the shared body rate');
}

await main();
