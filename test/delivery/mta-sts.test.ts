/**
 * MTA-STS on MX delivery (RFC 8461, docs/operations.md "Outbound TLS", issue 13 item 6): a domain whose policy is in
 * `enforce` mode gets TLS with a verified certificate on an MX the policy names, or a deferral,
 * never plain text; `testing` delivers and records what enforce would have refused. Everything
 * real on loopback: DNS peer, HTTPS policy host (test CA), sink MX with and without TLS; the
 * outcome is read back through GET /v1/messages/{id}.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type MtaStsServer, policyText, startMtaStsServer } from '../peers/mta-sts-server.ts';
import { type SinkMx, type SinkMxOptions, startSinkMx, TEST_CA_LEAF_CERT, TEST_CA_LEAF_KEY } from '../peers/sink-mx.ts';

const TEST_CA_FILE = fileURLToPath(new URL('../peers/certs/test-ca-cert.pem', import.meta.url));

let dns: DnsServer;
let web: MtaStsServer;

/** A recipient domain: its MX host (on 127.0.0.1) and, optionally, a published policy. */
function domain(name: string, mx: string, policy?: { mode: 'enforce' | 'testing' | 'none'; mx: string[] }) {
  dns.set(name, 'MX', [{ preference: 10, exchange: mx }]);
  dns.set(mx, 'A', ['127.0.0.1']);
  if (!policy) return;
  dns.set(`_mta-sts.${name}`, 'TXT', [`v=STSv1; id=${policy.mode}1;`]);
  dns.set(`mta-sts.${name}`, 'A', ['127.0.0.1']);
  web.set(`mta-sts.${name}`, { body: policyText(policy.mode, policy.mx) });
}

beforeAll(async () => {
  dns = await startDnsServer({});
  web = await startMtaStsServer();
  // The test CA's leaf covers *.sts.test and *.{a,b,c,d}.sts.test, not *.other.test.
  domain('a.sts.test', 'mx.a.sts.test', { mode: 'enforce', mx: ['mx.a.sts.test'] });
  domain('b.sts.test', 'mx.other.test', { mode: 'enforce', mx: ['mx.other.test'] });
  domain('c.sts.test', 'mx.c.sts.test', { mode: 'enforce', mx: ['*.elsewhere.test'] });
  domain('d.sts.test', 'mx.other.test', { mode: 'testing', mx: ['mx.d.sts.test'] });
  domain('sts.test', 'mx.sts.test', { mode: 'none', mx: [] });
  domain('plain.test', 'mx.plain.test');
});
afterAll(async () => {
  await dns?.close();
  await web?.close();
});

interface AttemptView {
  tls: boolean;
  tls_verified: boolean | null;
  mta_sts: string | null;
  outcome: string;
  transcript: string | null;
}

/** One context delivering to MX hosts on `sink`'s port, through the DNS peer and policy host. */
function environment(sinkOptions: SinkMxOptions) {
  const env = {
    sink: null as unknown as SinkMx,
    ctx: null as unknown as TestContext,
    t: null as unknown as TestTenant,
  };
  let worker: DeliveryWorker;
  beforeAll(async () => {
    env.sink = await startSinkMx(sinkOptions);
    env.ctx = await createTestContext({
      env: {
        POSTYARD_DNS_SERVERS: dns.address,
        POSTYARD_MX_PORT: String(env.sink.port),
        POSTYARD_MTA_STS_PORT: String(web.port),
        POSTYARD_EXTRA_CA_FILE: TEST_CA_FILE,
      },
    });
    env.t = await createTenant(env.ctx);
    worker = createDeliveryWorker(env.ctx.c, 'mta-sts-worker', { pollMs: 50 });
    worker.start();
  });
  afterAll(async () => {
    await worker?.stop();
    await env.ctx?.close();
    await env.sink?.close();
  });
  /** Sends to `rcpt` and returns the message once its first attempt is recorded. */
  const send = async (rcpt: string) => {
    const res = await call(env.ctx.app, 'POST', '/v1/transmissions', {
      key: env.t.apiKey,
      body: { recipients: [{ email: rcpt }], content: { subject: 's', text: 't' } },
    });
    expect(res.statusCode).toBe(202);
    const tx = await call(env.ctx.app, 'GET', `/v1/transmissions/${res.json().transmission_id}`, { key: env.t.apiKey });
    const id = tx.json().messages[0].id as string;
    const deadline = Date.now() + 20_000;
    for (;;) {
      const m = (await call(env.ctx.app, 'GET', `/v1/messages/${id}`, { key: env.t.apiKey })).json() as {
        state: string;
        attempts: AttemptView[];
      };
      // Message row and attempts are read apart: wait until both show the recorded outcome.
      if (m.attempts.length > 0 && m.state !== 'sending' && m.state !== 'queued')
        return { state: m.state, attempt: m.attempts[0] as AttemptView };
      if (Date.now() > deadline) throw new Error(`no attempt for ${rcpt} after 20 s (state ${m.state})`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const received = (rcpt: string) => env.sink.messages.filter((m) => m.rcptTo.includes(rcpt));
  return { env, send, received };
}

describe('MTA-STS, MX with a certificate from a trusted CA', () => {
  const { env, send, received } = environment({ tlsCert: TEST_CA_LEAF_CERT, tlsKey: TEST_CA_LEAF_KEY });

  it('enforce: delivers over TLS with a verified certificate and records the policy', async () => {
    const { state, attempt } = await send('ann@a.sts.test');
    expect(state).toBe('delivered');
    expect(attempt).toMatchObject({ tls: true, tls_verified: true, mta_sts: 'enforce', outcome: 'delivered' });
    expect(attempt.transcript).toMatch(/MTA-STS policy id enforce1: mode enforce/);
    expect(received('ann@a.sts.test').map((m) => m.tls)).toEqual([true]);
  });

  it('enforce: a certificate that does not name the MX host means a deferral, nothing sent', async () => {
    const { state, attempt } = await send('bob@b.sts.test');
    expect(state).toBe('deferred');
    expect(attempt).toMatchObject({ tls: true, tls_verified: false, mta_sts: 'enforce', outcome: 'deferred' });
    expect(attempt.transcript).toMatch(/certificate not verified for mx\.other\.test/);
    expect(attempt.transcript).not.toMatch(/^C: MAIL FROM/m);
    expect(received('bob@b.sts.test')).toEqual([]);
  });

  it('enforce: an MX host the policy does not name is never contacted', async () => {
    const before = env.sink.connectionCount();
    const { state, attempt } = await send('cat@c.sts.test');
    expect(state).toBe('deferred');
    expect(attempt).toMatchObject({ mta_sts: 'enforce', mx_host: null, outcome: 'deferred' });
    expect(attempt.transcript).toMatch(/no MX host of c\.sts\.test .* matches its MTA-STS policy/);
    expect(received('cat@c.sts.test')).toEqual([]);
    expect(env.sink.connectionCount()).toBe(before);
  });

  it('testing: delivers anyway and records what enforce would have refused', async () => {
    const { state, attempt } = await send('dan@d.sts.test');
    expect(state).toBe('delivered');
    expect(attempt).toMatchObject({ tls: true, tls_verified: false, mta_sts: 'testing' });
    expect(attempt.transcript).toMatch(
      /MTA-STS testing: enforce would refuse this \(mx\.other\.test is not in the policy's mx list, certificate not verified\)/,
    );
    expect(received('dan@d.sts.test')).toHaveLength(1);
  });

  it('mode none and no policy: opportunistic TLS as before, recorded as mta_sts none and null', async () => {
    const none = await send('eve@sts.test');
    expect(none.state).toBe('delivered');
    expect(none.attempt).toMatchObject({ mta_sts: 'none', tls: true });
    const plain = await send('fay@plain.test');
    expect(plain.state).toBe('delivered');
    // mx.plain.test is not in the certificate: recorded, not required without a policy.
    expect(plain.attempt).toMatchObject({ mta_sts: null, tls: true, tls_verified: false });
  });
});

describe('MTA-STS, MX without STARTTLS', () => {
  const { send, received } = environment({ tls: false });

  it('enforce: no STARTTLS means a deferral, never plain text', async () => {
    const { state, attempt } = await send('gus@a.sts.test');
    expect(state).toBe('deferred');
    expect(attempt).toMatchObject({ tls: false, tls_verified: null, mta_sts: 'enforce' });
    expect(attempt.transcript).toMatch(/does not offer STARTTLS/);
    expect(received('gus@a.sts.test')).toEqual([]);
  });

  it('testing: delivers in plain text and says enforce would have refused it', async () => {
    const { state, attempt } = await send('hal@d.sts.test');
    expect(state).toBe('delivered');
    expect(attempt).toMatchObject({ tls: false, tls_verified: null, mta_sts: 'testing' });
    expect(attempt.transcript).toMatch(/enforce would refuse this \(.*no TLS\)/);
  });
});

describe('MTA-STS, MX whose STARTTLS handshake fails', () => {
  const { send, received } = environment({ tls: 'broken' });

  it('enforce: a failed handshake is a deferral, with no plain-text retry', async () => {
    const { state, attempt } = await send('ida@a.sts.test');
    expect(state).toBe('deferred');
    expect(attempt).toMatchObject({ tls: false, mta_sts: 'enforce' });
    expect(attempt.transcript).not.toMatch(/reconnecting without TLS/);
    expect(received('ida@a.sts.test')).toEqual([]);
  });
});
