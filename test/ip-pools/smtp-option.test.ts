/**
 * X-Postyard-Options `ip_pool` over SMTP submission: the pool's id or name of the credential's
 * tenant is stored as the transmission's options.ip_pool_id; an unknown pool refuses the message
 * as the API's 422 does (550 5.6.0 naming the field); another tenant's pool is unknown.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant } from '../helpers/context.ts';
import { message, queuedId, RawClient, type SmtpSetup, sendRaw, setupSmtp } from '../smtp/helpers.ts';

let s: SmtpSetup;
let client: RawClient;
let poolId: string;
let foreignId: string;

beforeAll(async () => {
  s = await setupSmtp({ POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3' });
  const created = await call(s.ctx.app, 'POST', '/v1/ip-pools', {
    key: s.tenant.apiKey,
    body: { name: 'bulk', addresses: [{ address: '127.0.0.3' }] },
  });
  expect(created.statusCode, created.body).toBe(201);
  poolId = created.json().id;
  const other = await createTenant(s.ctx, 'Other <o@other.test>');
  foreignId = (
    await call(s.ctx.app, 'POST', '/v1/ip-pools', {
      key: other.apiKey,
      body: { name: 'theirs', addresses: [{ address: '127.0.0.2' }] },
    })
  ).json().id;
  client = await RawClient.ready(s.smtp.port, s.cred);
});
afterAll(async () => {
  client?.destroy();
  await s?.close();
});

async function optionsOf(transmissionId: string) {
  const res = await call(s.ctx.app, 'GET', `/v1/transmissions/${transmissionId}`, { key: s.tenant.apiKey });
  return res.json().options as Record<string, unknown>;
}

describe('X-Postyard-Options ip_pool', () => {
  it('takes a pool name or id of the tenant', async () => {
    for (const ref of ['bulk', poolId]) {
      const reply = await sendRaw(
        client,
        ['ann@dest.test'],
        message({ headers: [`X-Postyard-Options: ${JSON.stringify({ ip_pool: ref })}`] }),
      );
      expect((await optionsOf(queuedId(reply))).ip_pool_id).toBe(poolId);
    }
  });

  it('refuses an unknown pool, and another tenant’s, with 550 5.6.0', async () => {
    for (const ref of ['nope', foreignId]) {
      const reply = await sendRaw(
        client,
        ['ann@dest.test'],
        message({ headers: [`X-Postyard-Options: ${JSON.stringify({ ip_pool: ref })}`] }),
      );
      expect(reply).toMatch(/^550 5\.6\.0 .*ip_pool/);
    }
    const bad = await sendRaw(client, ['ann@dest.test'], message({ headers: ['X-Postyard-Options: {"ip_pool":7}'] }));
    expect(bad).toMatch(/^550 5\.6\.0 X-Postyard-Options: ip_pool/);
  });
});
