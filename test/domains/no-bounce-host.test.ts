import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { addDomain, BOUNCE_HOST, publish, record, verifyDomain } from './helpers.ts';

/**
 * Without a bounce host (POSTYARD_BOUNCE_HOST unset and an address-literal EHLO name, as on a
 * laptop following the README), a sending domain's records must not tell anyone to publish
 * `include:localhost` or a CNAME to localhost: the SPF and return-path records are left out,
 * and the first verification after a bounce host is configured adds them.
 */
let dns: DnsServer;
let bare: TestContext;
let configured: TestContext;
let t: TestTenant;

beforeAll(async () => {
  dns = await startDnsServer();
  bare = await createTestContext({
    env: { POSTYARD_DNS_SERVERS: dns.address, POSTYARD_EHLO_NAME: '[127.0.0.1]' },
  });
  t = await createTenant(bare);
});
afterAll(async () => {
  await configured?.close();
  await bare?.close();
  await dns?.close();
});

describe('sending domain records without a bounce host', () => {
  it('leaves out SPF and the return path, then adds them once a bounce host is configured', async () => {
    expect(bare.c.config.bounceHost).toBe('localhost');
    const domain = `nb-${Math.random().toString(36).slice(2, 8)}.example.test`;
    const d = await addDomain(bare, t.apiKey, domain);
    expect(d.dns_records.map((r) => r.purpose)).toEqual(['dkim', 'dmarc']);
    expect(JSON.stringify(d.dns_records)).not.toContain('localhost');

    // The operator sets POSTYARD_BOUNCE_HOST (a restart on the same data); verify completes the list.
    configured = await createTestContext({ shareWith: bare, env: { POSTYARD_BOUNCE_HOST: BOUNCE_HOST } });
    publish(dns, d);
    const v = await verifyDomain(configured, t.apiKey, d.id);
    expect(v.status).toBe('verified');
    expect(v.dns_records.map((r) => r.purpose)).toEqual(['dkim', 'spf', 'return_path', 'dmarc']);
    expect(record(v, 'spf')).toMatchObject({ value: `v=spf1 include:${BOUNCE_HOST} ~all`, status: 'failed' });
    expect(record(v, 'return_path')).toMatchObject({ name: `bounces.${domain}`, value: BOUNCE_HOST });
    expect(record(v, 'dkim').status).toBe('verified');
  });
});
