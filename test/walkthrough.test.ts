import { promises as dns } from 'node:dns';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sections, startCommandEnv } from './docs/markdown.ts';
import { runCli, SPAWN_TEST_TIMEOUT_MS, type ServerProcess, startServer } from './helpers/server-process.ts';
import { type DnsServer, startDnsServer } from './peers/dns-server.ts';
import { type SinkMx, startSinkMx } from './peers/sink-mx.ts';

/**
 * The README walkthrough, step by step, against a real server process started in exactly the
 * configuration step 1 tells the reader to use: the variables of its `npm start` command, plus
 * the SMTP catcher it offers (`POSTYARD_RELAY_URL=smtp://127.0.0.1:1025?tls=none`, with the
 * sink's port for 1025), every role, on SQLite (the README's default), and nothing else (no EHLO
 * name, no bounce host, no DNS servers: the records Postyard answers are those a newcomer gets).
 * The message reaches the sink DKIM-signed with the sending domain's key and verifiable with an
 * independent implementation (mailauth) from the records Postyard told us to publish.
 */
const README = readFileSync(join(import.meta.dirname, '../README.md'), 'utf8');
const WALKTHROUGH = sections(README).find((s) => s.title === 'Five-minute walkthrough')?.body ?? '';

let dnsServer: DnsServer;
let sink: SinkMx;
let server: ServerProcess;
let dataDir: string;

beforeAll(async () => {
  sink = await startSinkMx({ tls: false });
  // Only for mailauth, the independent verifier: Postyard itself is not pointed at it.
  dnsServer = await startDnsServer({});
  dataDir = mkdtempSync(join(tmpdir(), 'postyard-walkthrough-'));
});
afterAll(async () => {
  await server?.stop();
  await sink?.close();
  await dnsServer?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

// Spawns the server and the CLI: minutes under load (SPAWN_TIMEOUT_MS).
describe('README walkthrough', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('starts as step 1 says, creates a tenant, adds a sending domain, sends, and the mail arrives DKIM-signed', async () => {
    const startEnv = startCommandEnv(WALKTHROUGH);
    expect(startEnv).toEqual({ POSTYARD_DEV_MODE: 'true' });
    const relay = /`POSTYARD_RELAY_URL=(smtp:\/\/127\.0\.0\.1:1025\?tls=none)`/.exec(WALKTHROUGH)?.[1];
    if (!relay) throw new Error('the walkthrough no longer offers the local SMTP catcher');
    // The reader's ./data: a fresh directory here, shared by the server and the CLI as ./data is.
    const data = { POSTYARD_DATA_DIR: dataDir, DATABASE_URL: '' };
    server = await startServer([], {
      env: { ...startEnv, POSTYARD_RELAY_URL: relay.replace(':1025', `:${sink.port}`), ...data },
    });
    expect(await (await fetch(`${server.baseUrl}/healthz`)).json()).toEqual({ status: 'ok' });

    const created = await runCli(
      ['tenants', 'create', '--name', 'Acme', '--from', 'Acme <noreply@acme.test>', '--json'],
      { env: data },
    );
    expect(created.code, created.stderr).toBe(0);
    const { api_key: key } = JSON.parse(created.stdout) as { api_key: string };
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

    const domain = await fetch(`${server.baseUrl}/v1/sending-domains`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ domain: 'acme.test' }),
    });
    expect(domain.status).toBe(201);
    const records = ((await domain.json()) as { dns_records: { type: string; name: string; value: string }[] })
      .dns_records;
    // Nothing the reader is told to publish may point at localhost (no bounce host is configured).
    for (const r of records) expect(r.value, `${r.type} ${r.name}`).not.toMatch(/(^|[:\s])localhost\b/);
    const dkim = records.find((r) => r.name.includes('._domainkey.'));
    if (!dkim) throw new Error(`no DKIM record in ${JSON.stringify(records)}`);
    // "Publish" the DKIM record in the DNS the verifier asks.
    dnsServer.set(dkim.name, 'TXT', [dkim.value.match(/.{1,255}/g) ?? []]);

    const sent = await fetch(`${server.baseUrl}/v1/transmissions`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': 'welcome-42' },
      body: JSON.stringify({
        recipients: [{ email: 'ann@example.com' }],
        content: { subject: 'Hello', text: 'Hi Ann' },
      }),
    });
    expect(sent.status).toBe(202);
    const [got] = await sink.waitForMessages(1, 60_000);
    expect(got?.rcptTo).toEqual(['ann@example.com']);
    const resolver = new dns.Resolver();
    resolver.setServers([dnsServer.address]);
    const verdict = await dkimVerify(got?.raw as Buffer, {
      resolver: (async (name: string) => resolver.resolveTxt(name)) as never,
    });
    expect(verdict.results[0]?.status.result).toBe('pass');
    expect(verdict.results[0]?.signingDomain).toBe('acme.test');
  });
});
