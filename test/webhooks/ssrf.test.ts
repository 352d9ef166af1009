/**
 * SSRF guard with private targets NOT allowed (POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS=false and
 * POSTYARD_DEV_MODE=false): refused at create/PATCH (422), and again at connect time on the
 * address actually connected to.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowIso } from '../../src/lib/clock.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { newId } from '../../src/lib/ids.ts';
import { WebhookSender, newWebhookSecret } from '../../src/modules/webhooks/sender.ts';
import { createGuardedLookup, isForbiddenAddress } from '../../src/lib/address-guard.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';
import {
  deliveriesOf,
  emit,
  eventually,
  FAST,
  newEvent,
  type Receiver,
  sleep,
  startDispatcher,
  startReceiver,
} from './helpers.ts';

describe('isForbiddenAddress', () => {
  const forbidden = [
    '127.0.0.1',
    '127.255.255.254',
    '0.0.0.0',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '100.127.255.255',
    '169.254.169.254',
    '169.254.0.1',
    '224.0.0.1',
    '239.255.255.250',
    '255.255.255.255',
    '240.0.0.1',
    '192.0.2.10',
    '198.18.0.1',
    '::1',
    '::',
    '0:0:0:0:0:0:0:1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '::ffff:10.0.0.1',
    '[::1]',
    'fe80::1',
    'fe80::1%eth0',
    'febf::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '64:ff9b::7f00:1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::1',
    '2001:db8::1',
    '::127.0.0.1',
    'not-an-ip',
    '',
  ];
  const allowed = [
    '93.184.216.34',
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '169.255.0.1',
    '2606:4700::1111',
    '64:ff9b::808:808',
    '::ffff:8.8.8.8',
    '2002:808:808::1',
  ];
  it.each(forbidden)('refuses %s', (ip) => expect(isForbiddenAddress(ip)).toBe(true));
  it.each(allowed)('allows %s', (ip) => expect(isForbiddenAddress(ip)).toBe(false));
});

describe('guardedLookup (the connect-time resolver)', () => {
  const fake = (answers: Record<string, string[]>) =>
    createGuardedLookup((host, _opts, cb) =>
      cb(
        null,
        (answers[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
      ),
    );
  const run = (lookup: ReturnType<typeof fake>, host: string, all: boolean) =>
    new Promise<{ err: Error | null; address: unknown; family?: number }>((resolve) =>
      lookup(host, { all }, (err, address, family) => resolve({ err, address, ...(family ? { family } : {}) })),
    );
  const lookup = fake({
    'public.test': ['93.184.216.34', '2606:2800:220:1::1'],
    'mixed.test': ['93.184.216.34', '10.0.0.5'],
    'meta.test': ['169.254.169.254'],
    'mapped.test': ['::ffff:127.0.0.1'],
  });

  it('passes public answers through in both callback forms (net.connect uses both)', async () => {
    expect(await run(lookup, 'public.test', false)).toEqual({ err: null, address: '93.184.216.34', family: 4 });
    const all = await run(lookup, 'public.test', true);
    expect(all.err).toBeNull();
    expect(all.address).toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
  });

  it('fails the whole answer when any address is forbidden (no steering to the private one)', async () => {
    for (const host of ['mixed.test', 'meta.test', 'mapped.test']) {
      const r = await run(lookup, host, false);
      expect(r.err?.message, host).toBe(`${host} is not an allowed target`);
    }
    expect((await run(lookup, 'nothing.test', true)).err?.message).toMatch(/no address/);
  });
});

describe('with private targets refused', () => {
  let ctx: TestContext;
  let t: TestTenant;
  let rx: Receiver;

  beforeAll(async () => {
    ctx = await createTestContext({
      env: { POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS: 'false', POSTYARD_DEV_MODE: 'false' },
    });
    t = await createTenant(ctx);
    rx = await startReceiver();
  });
  afterAll(async () => {
    await rx?.close();
    await ctx?.close();
  });

  const refused = [
    'http://127.0.0.1/hook',
    'http://127.0.0.1:8080/hook',
    'http://localhost/hook', // a name that resolves to loopback
    'http://[::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://[::ffff:7f00:1]/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://10.0.0.1/',
    'http://172.16.5.4/',
    'http://192.168.0.1/',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://[fd00::1]/',
    'http://[fe80::1]/',
    'http://224.0.0.1/',
    'http://2130706433/', // 127.0.0.1 as one decimal number
    'http://0x7f.0.0.1/', // and in hex
  ];

  it.each(refused)('POST /v1/webhooks refuses %s with 422 on url', async (url) => {
    const res = await call(ctx.app, 'POST', '/v1/webhooks', { key: t.apiKey, body: { url } });
    const body = expectError(res, 422, 'validation_failed');
    expect((body.errors[0] as { field?: string }).field).toBe('url');
  });

  it('accepts a public literal address (no DNS needed) and refuses a PATCH to a private one', async () => {
    const res = await call(ctx.app, 'POST', '/v1/webhooks', {
      key: t.apiKey,
      body: { url: 'https://93.184.216.34/hook' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id;
    for (const url of ['http://localhost:1/x', 'http://169.254.169.254/', 'http://[::1]/']) {
      const patch = await call(ctx.app, 'PATCH', `/v1/webhooks/${id}`, { key: t.apiKey, body: { url } });
      expectError(patch, 422, 'validation_failed');
    }
    expect((await call(ctx.app, 'GET', `/v1/webhooks/${id}`, { key: t.apiKey })).json().url).toBe(
      'https://93.184.216.34/hook',
    );
  });

  it('refuses a name that does not resolve', async () => {
    const res = await call(ctx.app, 'POST', '/v1/webhooks', {
      key: t.apiKey,
      body: { url: 'https://no-such-host.invalid/hook' },
    });
    expectError(res, 422, 'validation_failed');
  });

  it('the 422 for a name resolving to an internal address says only that it is not allowed (no address, no hint it exists)', async () => {
    const messageFor = async (url: string) => {
      const res = await call(ctx.app, 'POST', '/v1/webhooks', { key: t.apiKey, body: { url } });
      const body = expectError(res, 422, 'validation_failed');
      return (body.errors[0] as { field?: string; message: string }).message;
    };
    const internal = await messageFor('http://localhost:8080/hook');
    expect(internal).toBe('url host localhost is not allowed (a webhook target must resolve to public addresses only)');
    expect(internal).not.toMatch(/127\.0\.0\.1|::1|loopback|private/);
    // A name that does not resolve gets the same answer: probing internal names tells nothing.
    expect(await messageFor('https://no-such-host.invalid/hook')).toBe(
      'url host no-such-host.invalid is not allowed (a webhook target must resolve to public addresses only)',
    );
    const created = await call(ctx.app, 'POST', '/v1/webhooks', {
      key: t.apiKey,
      body: { url: 'https://93.184.216.34/hook' },
    });
    const patch = await call(ctx.app, 'PATCH', `/v1/webhooks/${created.json().id}`, {
      key: t.apiKey,
      body: { url: 'http://localhost/x' },
    });
    expect(JSON.stringify(expectError(patch, 422, 'validation_failed'))).not.toMatch(/127\.0\.0\.1|::1/);
  });

  it('checks again at connect time: a name resolving to loopback is refused by the sender, nothing reaches the port', async () => {
    const sender = new WebhookSender({ allowPrivate: false, timeoutMs: 3000 });
    try {
      for (const url of [
        `http://localhost:${rx.port}/hook`,
        `http://127.0.0.1:${rx.port}/hook`,
        `http://[::ffff:127.0.0.1]:${rx.port}/hook`,
      ]) {
        const res = await sender.send({ url, msgId: 'm', body: '{}', keys: [Buffer.alloc(32)] });
        expect(res.ok, url).toBe(false);
        expect(res.statusCode).toBeNull();
        expect(res.error, url).toMatch(/^refused: /);
        if (url.includes('localhost')) expect(res.error).toBe('refused: localhost is not an allowed target');
      }
    } finally {
      await sender.close();
    }
    expect(rx.received).toHaveLength(0);
    // The same sender with private targets allowed does reach it (the receiver works).
    const open = new WebhookSender({ allowPrivate: true });
    expect(
      (await open.send({ url: `http://localhost:${rx.port}/hook`, msgId: 'm', body: '{}', keys: [Buffer.alloc(32)] }))
        .ok,
    ).toBe(true);
    await open.close();
    expect(rx.received).toHaveLength(1);
  });

  it('the dispatcher refuses at connect time a target that passed an earlier check (DNS rebinding)', async () => {
    const before = rx.received.length;
    // The row bypasses the create-time check, as a name whose DNS answer changed afterwards would.
    const id = newId();
    const now = nowIso();
    await ctx.c.database.db
      .insertInto('webhooks')
      .values({
        tenant_id: t.tenantId,
        id,
        name: 'rebound',
        url: `http://localhost:${rx.port}/hook`,
        events: '["*"]',
        dispatch_policy: 'single',
        batch_max_size: 100,
        batch_max_wait_ms: 1000,
        enabled: 1,
        status: 'active',
        disabled_reason: null,
        secret_enc: encryptSecret(ctx.c.masterKey, newWebhookSecret()),
        previous_secret_enc: null,
        previous_secret_expires_at: null,
        failing_since: null,
        last_success_at: null,
        last_failure_at: null,
        created_at: now,
        updated_at: now,
      })
      .execute();
    ctx.c.webhooks.registry.invalidate();
    const d = startDispatcher(ctx, FAST, 'ssrf-node');
    try {
      await emit(ctx, [newEvent(t.tenantId)]);
      const log = await eventually(async () => (await deliveriesOf(ctx, t.apiKey, id))[0]);
      expect(log).toMatchObject({ outcome: 'retrying', status_code: null });
      // The delivery log (shown to the tenant) names the host, never the address it resolved to.
      expect(String(log.error)).toBe('refused: localhost is not an allowed target');
      await sleep(200);
      expect(rx.received.length).toBe(before);
    } finally {
      await d.stop();
    }
  });
});
