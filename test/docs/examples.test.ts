/**
 * Every example of docs/api.md and docs/quickstart.md runs against a real server started with
 * exactly the configuration docs/quickstart.md tells the reader to use (the variables of its
 * `npm start` command, nothing else: not the suite's usual test settings); docs/api.md sends
 * newcomers to the quickstart first, so its examples run against the same server:
 * - ```sh run blocks: executed by bash with the real `curl`, POSTYARD_URL/POSTYARD_KEY pointing at
 *   a test server, and ids ($WEBHOOK_ID, ...) of fresh resources; every curl must answer 2xx, or
 *   the status given as `expect=NNN`;
 * - ```ts file=examples/x.ts blocks: must equal docs/examples/x.ts byte for byte, and every such
 *   file is imported (run) here, against the client's sources.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Postyard } from '@postyard/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { countRows, type LiveServer, MAIL, startLiveServer } from '../client/helpers.ts';
import { SPAWN_TEST_TIMEOUT_MS, SPAWN_TIMEOUT_MS } from '../helpers/server-process.ts';
import { type FencedBlock, fencedBlocks, startCommandEnv } from './markdown.ts';

const run = promisify(execFile);
const DOCS = join(import.meta.dirname, '../../docs');
const PAGES = ['api.md', 'quickstart.md'];
const blocks = PAGES.flatMap((page) =>
  fencedBlocks(readFileSync(join(DOCS, page), 'utf8')).map((b) => ({ ...b, page })),
);
const shellBlocks = blocks.filter((b) => b.lang === 'sh' && b.attrs.run);
const fileBlocks = blocks.filter((b) => b.attrs.file !== undefined);

let live: LiveServer;
let client: Postyard;
let workDir: string;
const env: Record<string, string> = {};

/** Fresh resources for the variables a block uses, so blocks never depend on one another. */
const MAKERS: Record<string, () => Promise<string>> = {
  TRANSMISSION_ID: async () => (await client.transmissions.send(MAIL)).transmission_id,
  MESSAGE_ID: async () => {
    const tx = await client.transmissions.get((await client.transmissions.send(MAIL)).transmission_id);
    return tx.messages[0]?.id as string;
  },
  SUPPRESSION_ID: async () => {
    const identifier = `s${Math.random().toString(36).slice(2)}@example.com`;
    await client.suppressions.upsert({ items: [{ identifier, type: 'email', reason_category: 'manual' }] });
    return (await client.suppressions.list({ identifier })).data[0]?.id as string;
  },
  WEBHOOK_ID: async () => (await client.webhooks.create({ url: 'http://127.0.0.1:9/hook' })).id,
  API_KEY_ID: async () => (await client.apiKeys.create({ name: 'doc', scopes: ['read:events'] })).id,
  SMTP_CREDENTIAL_ID: async () => (await client.smtpCredentials.create({ name: 'doc' })).id,
  TEMPLATE_ID: async () =>
    (
      await client.templates.create({
        name: `t${Math.random().toString(36).slice(2, 10)}`,
        subject: 'Hello {{first}}',
        text: 'Hi {{first}}',
      })
    ).id,
  DOMAIN_ID: async () =>
    (await client.sendingDomains.create({ domain: `d${Math.random().toString(36).slice(2, 10)}.example.test` })).id,
};

beforeAll(async () => {
  // e.g. { POSTYARD_DEV_MODE: 'true' }; only the data dir and silent logs are added.
  live = await startLiveServer({
    exactEnv: true,
    env: startCommandEnv(readFileSync(join(DOCS, 'quickstart.md'), 'utf8')),
  });
  client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
  workDir = mkdtempSync(join(tmpdir(), 'postyard-doc-examples-'));
  Object.assign(env, { POSTYARD_URL: live.baseUrl, POSTYARD_KEY: live.tenant.apiKey });
});
afterAll(async () => {
  await live?.close();
  rmSync(workDir, { recursive: true, force: true });
});

async function runShell(block: FencedBlock): Promise<number[]> {
  const vars: Record<string, string> = {};
  for (const [name, make] of Object.entries(MAKERS)) if (block.code.includes(`$${name}`)) vars[name] = await make();
  // Every curl reports its status on a line of its own; -sS keeps errors visible.
  const script = `set -euo pipefail\ncurl() { command curl -w '\\n__STATUS__ %{http_code}\\n' "$@"; }\n${block.code}`;
  const { stdout } = await run('bash', ['-c', script], {
    cwd: workDir,
    env: { PATH: process.env.PATH ?? '', HOME: workDir, ...env, ...vars },
    // bash and curl are spawned: generous under load (see SPAWN_TIMEOUT_MS).
    timeout: SPAWN_TIMEOUT_MS,
  });
  return [...stdout.matchAll(/__STATUS__ (\d{3})/g)].map((m) => Number(m[1]));
}

describe('curl examples', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('there are curl examples for every endpoint page', () => {
    expect(shellBlocks.length).toBeGreaterThan(25);
    expect(shellBlocks.every((b) => b.code.includes('curl '))).toBe(true);
    const untagged = blocks.filter((b) => b.code.includes('curl ') && !b.attrs.run);
    expect(
      untagged.map((b) => `${b.page} > ${b.heading}`),
      'curl examples not run by this test',
    ).toEqual([]);
  });

  for (const block of shellBlocks) {
    it(`${block.page} > ${block.heading}: ${block.code.split('\n')[0]?.slice(0, 70)}`, async () => {
      const statuses = await runShell(block);
      expect(statuses.length).toBeGreaterThan(0);
      const expected = block.attrs.expect ? Number(block.attrs.expect) : null;
      for (const s of statuses) {
        if (expected !== null) expect(s).toBe(expected);
        else expect(s >= 200 && s < 300, `curl answered ${s}`).toBe(true);
      }
    });
  }
});

describe('client examples', () => {
  const files = readdirSync(join(DOCS, 'examples')).filter((f) => f.endsWith('.ts'));
  let logs: string[] = [];
  const capture = () => {
    logs = [];
    const keep = (...args: unknown[]) =>
      logs.push(args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' '));
    vi.spyOn(console, 'log').mockImplementation(keep);
    vi.spyOn(console, 'warn').mockImplementation(keep);
  };
  afterEach(() => vi.restoreAllMocks());

  it('each ts block is its docs/examples file verbatim, and every example file is shown', () => {
    for (const b of fileBlocks) {
      const text = readFileSync(join(DOCS, b.attrs.file as string), 'utf8');
      expect(b.code, `${b.page}: ${b.attrs.file}`).toBe(text);
    }
    const shown = new Set(fileBlocks.map((b) => (b.attrs.file as string).replace(/^examples\//, '')));
    expect(files.filter((f) => !shown.has(f))).toEqual([]);
  });

  it('send.ts sends one transmission', async () => {
    const before = await countRows(live.ctx, 'transmissions', live.tenant.tenantId);
    Object.assign(process.env, env);
    await import('../../docs/examples/send.ts');
    expect(await countRows(live.ctx, 'transmissions', live.tenant.tenantId)).toBe(before + 1);
  });

  it('errors.ts shows a typed 422 with its fields and request id', async () => {
    capture();
    Object.assign(process.env, env);
    await import('../../docs/examples/errors.ts');
    expect(logs[0]).toBe('422 validation_failed');
    expect(logs[1]).toContain('recipients[0].email');
    expect(logs[2]).toMatch(/request [0-9a-f-]{36}$/);
  });

  it('retries.ts sends one email for two calls with the same key', async () => {
    capture();
    const before = await countRows(live.ctx, 'transmissions', live.tenant.tenantId);
    Object.assign(process.env, env);
    await import('../../docs/examples/retries.ts');
    expect(logs).toEqual(['true']);
    expect(await countRows(live.ctx, 'transmissions', live.tenant.tenantId)).toBe(before + 1);
  });

  it('suppressions.ts upserts, imports and iterates', async () => {
    capture();
    Object.assign(process.env, env);
    await import('../../docs/examples/suppressions.ts');
    expect(logs[0]).toBe(JSON.stringify({ imported: 2, skipped: 0, errors: [] }));
    expect(logs.slice(1)).toEqual(expect.arrayContaining(['bob@example.com unsubscribe api']));
    expect(logs.slice(1)).toEqual(expect.arrayContaining(['carol@example.com manual import']));
  });

  it('webhook-receiver.ts accepts a real signed delivery and refuses a forged one', async () => {
    capture();
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const hook = await client.webhooks.create({ url: `http://127.0.0.1:${port}/postyard` });
    Object.assign(process.env, { POSTYARD_WEBHOOK_SECRET: hook.secret as string, PORT: String(port) });
    const { server } = await import('../../docs/examples/webhook-receiver.ts');
    try {
      await new Promise((resolve) => (server.listening ? resolve(null) : server.once('listening', resolve)));
      expect(await client.webhooks.test(hook.id)).toMatchObject({ delivered: true, status_code: 204 });
      expect(logs.some((l) => l.includes('webhook.test'))).toBe(true);
      const forged = await fetch(`http://127.0.0.1:${port}/postyard`, {
        method: 'POST',
        headers: {
          'webhook-id': 'msg_1',
          'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
          'webhook-signature': 'v1,AAAA',
        },
        body: '{"id":"x","type":"message.delivered"}',
      });
      expect(forged.status).toBe(401);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
