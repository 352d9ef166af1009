/**
 * Outbound TLS to a configured relay (docs/operations.md "Outbound TLS", issue 13 item 6): TLS with a verified
 * certificate unless the operator opts out in POSTYARD_RELAY_URL, and AUTH never in clear text.
 * Real delivery worker, real SMTP relay on loopback (sink-mx.ts), test CA from test/peers/certs.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import { call, createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import { type SinkMxOptions, startSinkMx, TEST_CA_LEAF_CERT, TEST_CA_LEAF_KEY } from '../peers/sink-mx.ts';

const TEST_CA_FILE = fileURLToPath(new URL('../peers/certs/test-ca-cert.pem', import.meta.url));
const CREDENTIALS = { user: 'relay-user', pass: 'relay-secret' };

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

interface AttemptView {
  tls: boolean;
  tls_verified: boolean | null;
  outcome: string;
  transcript: string | null;
}

/**
 * Starts a relay with `sinkOptions`, points POSTYARD_RELAY_URL at it (`url(port)`), sends one
 * message and returns the relay and the message once its first attempt is recorded.
 */
async function sendThroughRelay(sinkOptions: SinkMxOptions, url: (port: number) => string, trustTestCa = true) {
  const relay = await startSinkMx({ auth: CREDENTIALS, ...sinkOptions });
  cleanups.push(() => relay.close());
  const ctx: TestContext = await createTestContext({
    env: { POSTYARD_RELAY_URL: url(relay.port), ...(trustTestCa ? { POSTYARD_EXTRA_CA_FILE: TEST_CA_FILE } : {}) },
  });
  cleanups.push(() => ctx.close());
  const t = await createTenant(ctx);
  const worker = createDeliveryWorker(ctx.c, 'relay-tls-worker', { pollMs: 50 });
  worker.start();
  cleanups.push(() => worker.stop());
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: { recipients: [{ email: 'ann@example.net' }], content: { subject: 's', text: 't' } },
  });
  expect(res.statusCode).toBe(202);
  const tx = await call(ctx.app, 'GET', `/v1/transmissions/${res.json().transmission_id}`, { key: t.apiKey });
  const messageId = tx.json().messages[0].id as string;
  const deadline = Date.now() + 20_000;
  for (;;) {
    const m = await call(ctx.app, 'GET', `/v1/messages/${messageId}`, { key: t.apiKey });
    const body = m.json() as { state: string; attempts: AttemptView[] };
    // Message row and attempts are read apart: wait until both show the recorded outcome.
    if (body.attempts.length > 0 && body.state !== 'sending' && body.state !== 'queued')
      return { relay, message: body, attempt: body.attempts[0] as AttemptView };
    if (Date.now() > deadline) throw new Error(`no attempt recorded after 20 s (state ${body.state})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('relay TLS', () => {
  it('a relay whose STARTTLS handshake fails gets neither AUTH nor the message in plain text', async () => {
    const { relay, message, attempt } = await sendThroughRelay(
      { tls: 'broken' },
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}`,
    );
    expect(relay.auths).toEqual([]);
    expect(relay.messages).toEqual([]);
    expect(message.state).toBe('deferred');
    expect(attempt).toMatchObject({ tls: false, outcome: 'deferred' });
    expect(attempt.transcript).not.toMatch(/^C: AUTH/m);
    expect(attempt.transcript).not.toMatch(/reconnecting without TLS/);
  });

  it('a relay that does not offer STARTTLS gets neither AUTH nor the message', async () => {
    const { relay, message, attempt } = await sendThroughRelay(
      { tls: false },
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}`,
    );
    expect(relay.auths).toEqual([]);
    expect(relay.messages).toEqual([]);
    expect(message.state).toBe('deferred');
    expect(attempt.transcript).toMatch(/does not offer STARTTLS/);
  });

  it('a relay whose certificate no trusted CA signed gets neither AUTH nor the message', async () => {
    // The default sink certificate is self-signed.
    const { relay, message, attempt } = await sendThroughRelay(
      {},
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}`,
    );
    expect(relay.auths).toEqual([]);
    expect(relay.messages).toEqual([]);
    expect(message.state).toBe('deferred');
    expect(attempt).toMatchObject({ tls: true, tls_verified: false });
    expect(attempt.transcript).toMatch(/certificate not verified/);
  });

  it('a relay with a certificate from a trusted CA gets STARTTLS, then AUTH, then the message', async () => {
    const { relay, message, attempt } = await sendThroughRelay(
      { tlsCert: TEST_CA_LEAF_CERT, tlsKey: TEST_CA_LEAF_KEY },
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}`,
    );
    expect(relay.auths).toEqual([{ user: CREDENTIALS.user, tls: true }]);
    expect(relay.messages.map((m) => m.tls)).toEqual([true]);
    expect(message.state).toBe('delivered');
    expect(attempt).toMatchObject({ tls: true, tls_verified: true, outcome: 'delivered' });
  });

  it('without the extra CA the same relay certificate is refused', async () => {
    const { relay, message } = await sendThroughRelay(
      { tlsCert: TEST_CA_LEAF_CERT, tlsKey: TEST_CA_LEAF_KEY },
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}`,
      false,
    );
    expect(relay.auths).toEqual([]);
    expect(message.state).toBe('deferred');
  });

  it('smtps:// speaks implicit TLS and verifies the certificate', async () => {
    const { relay, message, attempt } = await sendThroughRelay(
      { secure: true, tlsCert: TEST_CA_LEAF_CERT, tlsKey: TEST_CA_LEAF_KEY },
      (port) => `smtps://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}`,
    );
    expect(relay.auths).toEqual([{ user: CREDENTIALS.user, tls: true }]);
    expect(message.state).toBe('delivered');
    expect(attempt).toMatchObject({ tls: true, tls_verified: true });
  });

  it('?verify=false (explicit opt-out) accepts an unverified certificate but still requires TLS', async () => {
    const selfSigned = await sendThroughRelay(
      {},
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}?verify=false`,
    );
    expect(selfSigned.relay.auths).toEqual([{ user: CREDENTIALS.user, tls: true }]);
    expect(selfSigned.message.state).toBe('delivered');
    expect(selfSigned.attempt).toMatchObject({ tls: true, tls_verified: false });

    const broken = await sendThroughRelay(
      { tls: 'broken' },
      (port) => `smtp://${CREDENTIALS.user}:${CREDENTIALS.pass}@127.0.0.1:${port}?verify=false`,
    );
    expect(broken.relay.auths).toEqual([]);
    expect(broken.relay.messages).toEqual([]);
    expect(broken.message.state).toBe('deferred');
  });

  it('?tls=none (explicit opt-out) sends in plain text to a relay without credentials', async () => {
    const { relay, message, attempt } = await sendThroughRelay(
      { tls: false },
      (port) => `smtp://127.0.0.1:${port}?tls=none`,
    );
    expect(relay.messages.map((m) => m.tls)).toEqual([false]);
    expect(message.state).toBe('delivered');
    expect(attempt).toMatchObject({ tls: false, tls_verified: null });
  });

  it('refuses at start-up a relay URL that would send credentials without TLS, or an unknown option', () => {
    const bad = [
      'smtp://user:pass@relay.example.com:587?tls=none',
      'smtps://relay.example.com?tls=none',
      'smtp://relay.example.com?tls=off',
      'smtp://relay.example.com?verify=no',
      'smtp://relay.example.com?starttls=false',
    ];
    for (const url of bad) {
      expect(() => loadConfig({ POSTYARD_RELAY_URL: url }), url).toThrow(ConfigError);
      expect(() => loadConfig({ POSTYARD_RELAY_URL: url }), url).toThrow(/^POSTYARD_RELAY_URL: /);
    }
    for (const url of [
      'smtp://user:pass@relay.example.com:587',
      'smtp://user:pass@relay.example.com:587?verify=false',
      'smtp://relay.example.com:25?tls=none',
      'smtps://user:pass@relay.example.com',
    ]) {
      expect(loadConfig({ POSTYARD_RELAY_URL: url }).relayUrl).toBe(url);
    }
  });
});
