import { promises as dns } from 'node:dns';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from './peers/dns-server.ts';
import { type SinkMx, startSinkMx } from './peers/sink-mx.ts';
import { runCli, SPAWN_TEST_TIMEOUT_MS, type ServerProcess, startServer } from './helpers/server-process.ts';

/**
 * The README walkthrough, step by step, against a real server process: the message reaches a
 * sink acting as example.com's MX, DKIM-signed with the sending domain's key and verifiable with
 * an independent implementation (mailauth) from the records Postyard told us to publish.
 * Runs on SQLite (the README's default).
 */
let dnsServer: DnsServer;
let sink: SinkMx;
let server: ServerProcess;
let dataDir: string;

beforeAll(async () => {
  sink = await startSinkMx();
  dnsServer = await startDnsServer({
    'example.com': { MX: [{ preference: 10, exchange: 'mx.example.com' }] },
    'mx.example.com': { A: ['127.0.0.1'] },
  });
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
  it('creates a tenant, adds a sending domain, sends, and the mail arrives DKIM-signed', async () => {
    const env = {
      POSTYARD_DATA_DIR: dataDir,
      POSTYARD_DEV_MODE: 'true',
      POSTYARD_DNS_SERVERS: dnsServer.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
      DATABASE_URL: '',
    };
    server = await startServer(['--roles', 'api,worker'], { env });
    const created = await runCli(
      ['tenants', 'create', '--name', 'Acme', '--from', 'Acme <noreply@acme.test>', '--json'],
      { env },
    );
    expect(created.code).toBe(0);
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
    const [got] = await sink.waitForMessages(1, 20_000);
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
