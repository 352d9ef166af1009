/**
 * `postyard doctor` as a real child process against loopback peers only: the test DNS server
 * (POSTYARD_DNS_SERVERS) serves the sending domain's records and the PTR of 127.0.0.1, the sink
 * MX stands in for a receiving server (--target 127.0.0.1:<port>), and the TLS certificates are
 * made here. Both backends (TEST_DATABASE_URL).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import { freePort, killChildren, runCli, SPAWN_TEST_TIMEOUT_MS } from '../helpers/server-process.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { cliEnvFor } from './cli-env.ts';

const HOST = 'mx.postyard.test';
const DOMAIN = 'acme.test';
const PTR_NAME = '1.0.0.127.in-addr.arpa';

let ctx: TestContext;
let dns: DnsServer;
let sink: SinkMx;
let certDir: string;
let baseEnv: Record<string, string>;

interface Finding {
  check: string;
  status: 'ok' | 'warn' | 'fail';
  message: string;
  fix?: string;
}

async function writeCert(name: string, days: number, host: string) {
  const now = Date.now();
  const pems = await generate([{ name: 'commonName', value: host }], {
    keySize: 2048,
    algorithm: 'sha256',
    notBeforeDate: new Date(now - 400 * 86_400_000),
    notAfterDate: new Date(now + days * 86_400_000),
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: host }] }],
  });
  writeFileSync(join(certDir, `${name}.crt`), pems.cert);
  writeFileSync(join(certDir, `${name}.key`), pems.private);
  return { POSTYARD_SMTP_TLS_CERT: join(certDir, `${name}.crt`), POSTYARD_SMTP_TLS_KEY: join(certDir, `${name}.key`) };
}

beforeAll(async () => {
  dns = await startDnsServer({});
  sink = await startSinkMx();
  certDir = mkdtempSync(join(tmpdir(), 'postyard-doctor-'));
  const names = { POSTYARD_EHLO_NAME: HOST, POSTYARD_BOUNCE_HOST: HOST, POSTYARD_DNS_SERVERS: dns.address };
  ctx = await createTestContext({ env: names });
  const { tenantId } = await createTenant(ctx);
  const domain = await ctx.c.domains.create(tenantId, await ctx.c.domains.prepare(tenantId, { domain: DOMAIN }));
  for (const r of domain.dns_records) {
    // One TXT character-string holds at most 255 bytes: the DKIM key comes in several.
    if (r.type === 'TXT') dns.set(r.name, 'TXT', [r.value.match(/.{1,255}/g) ?? []]);
    else dns.set(r.name, 'CNAME', [r.value]);
  }
  dns.set(HOST, 'A', ['127.0.0.1']);
  dns.set(PTR_NAME, 'PTR', [HOST]);
  // Production-like settings: no development mode, an https public URL.
  baseEnv = cliEnvFor(ctx, {
    ...names,
    POSTYARD_PUBLIC_URL: `https://${HOST}`,
    ...(await writeCert('good', 365, HOST)),
  });
});

afterAll(async () => {
  killChildren();
  await sink?.close();
  await dns?.close();
  await ctx?.close();
  rmSync(certDir, { recursive: true, force: true });
});

async function doctor(env: Record<string, string>, target: string) {
  const r = await runCli(['doctor', '--target', target, '--timeout', '20', '--json'], { env });
  const findings = (JSON.parse(r.stdout) as { findings: Finding[] }).findings;
  return { ...r, findings, byCheck: (check: string) => findings.filter((f) => f.check === check) };
}

describe('postyard doctor', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('passes every check when DNS, port 25, reverse DNS and the certificate are right', async () => {
    const r = await doctor(baseEnv, `127.0.0.1:${sink.port}`);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.findings.filter((f) => f.status !== 'ok')).toEqual([]);
    for (const purpose of ['dkim', 'spf', 'return_path', 'dmarc']) {
      expect(r.byCheck(`dns ${DOMAIN} ${purpose}`).map((f) => f.status)).toEqual(['ok']);
    }
    expect(r.byCheck('outbound')[0]?.message).toContain('sink.test ESMTP');
    expect(r.byCheck('ptr 127.0.0.1')[0]?.message).toContain(HOST);
    expect(r.byCheck('tls')[0]?.message).toContain(`valid for ${HOST}`);
    expect(sink.connectionCount()).toBeGreaterThan(0);
  });

  it('prints what to fix and exits 1: missing DMARC and PTR, closed port 25, expired certificate for another name', async () => {
    dns.remove(`_dmarc.${DOMAIN}`);
    dns.remove(PTR_NAME);
    const closedPort = await freePort();
    const env = { ...baseEnv, ...(await writeCert('expired', -2, 'other.test')) };
    try {
      const r = await doctor(env, `127.0.0.1:${closedPort}`);
      expect(r.code, r.stdout + r.stderr).toBe(1);
      const dmarc = r.byCheck(`dns ${DOMAIN} dmarc`)[0];
      expect(dmarc?.status).toBe('fail');
      expect(dmarc?.fix).toContain(`publish TXT _dmarc.${DOMAIN} "v=DMARC1; p=none;"`);
      expect(r.byCheck(`dns ${DOMAIN} dkim`)[0]?.status).toBe('ok');
      const outbound = r.byCheck('outbound')[0];
      expect(outbound?.status).toBe('fail');
      expect(outbound?.message).toContain('ECONNREFUSED');
      expect(outbound?.fix).toContain('firewall');
      // No connection, no source address: the PTR check asks for one instead of guessing.
      expect(r.byCheck('ptr')[0]?.fix).toContain('--source');
      const tls = r.byCheck('tls');
      expect(tls.find((f) => f.message.includes('expired'))?.status).toBe('fail');
      expect(tls.find((f) => f.message.includes(`not valid for the EHLO name ${HOST}`))?.status).toBe('fail');
    } finally {
      dns.set(`_dmarc.${DOMAIN}`, 'TXT', ['v=DMARC1; p=none;']);
      dns.set(PTR_NAME, 'PTR', [HOST]);
    }
  });

  it('fails the PTR check of a source address without reverse DNS', async () => {
    dns.remove(PTR_NAME);
    try {
      const r = await runCli(['doctor', '--target', `127.0.0.1:${sink.port}`, '--source', '127.0.0.1'], {
        env: baseEnv,
      });
      expect(r.code, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).toMatch(/^FAIL {2}ptr 127\.0\.0\.1: no PTR record/m);
      expect(r.stdout).toContain(`set its PTR record to ${HOST}`);
      expect(r.stdout).toMatch(/^1 problem to fix, 0 warnings$/m);
    } finally {
      dns.set(PTR_NAME, 'PTR', [HOST]);
    }
  });

  it('reports a configuration error as a finding and exits 1', async () => {
    const r = await runCli(['doctor', '--target', `127.0.0.1:${sink.port}`], {
      env: { ...baseEnv, POSTYARD_LOG_LEVEL: 'loud' },
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL {2}config: POSTYARD_LOG_LEVEL: unknown level "loud"/m);
  });
});
