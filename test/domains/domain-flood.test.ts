/**
 * A tenant creating sending domains in a loop must not starve the rest of the process: each one
 * costs an RSA-2048 key generation on libuv's thread pool, the pool SMTP AUTH's scrypt also
 * runs on. Key generations run one at a time process-wide, so an AUTH started during a flood of
 * 40 creations completes long before the flood does; and a tenant's domains are capped
 * (POSTYARD_MAX_DOMAINS_PER_TENANT, or tenants.max_sending_domains), answered 409
 * `domain_limit_reached`. Real SMTP client (nodemailer, STARTTLS + AUTH) against the submission
 * server of the same process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import { mailer, type SmtpSetup, setupSmtp } from '../smtp/helpers.ts';

const FLOOD = 40;
const unique = () => Math.random().toString(36).slice(2, 8);

describe('a flood of sending-domain creations', () => {
  let s: SmtpSetup;
  beforeAll(async () => {
    s = await setupSmtp();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('SMTP AUTH completes while most of 40 parallel key generations are still pending', async () => {
    const tag = unique();
    let done = 0;
    const creations = Array.from({ length: FLOOD }, (_, i) =>
      call(s.ctx.app, 'POST', '/v1/sending-domains', {
        key: s.tenant.apiKey,
        body: { domain: `flood${i}-${tag}.example.test` },
      }).then((res) => {
        done++;
        return res;
      }),
    );
    // Let every creation reach its key generation before the client connects.
    await new Promise((r) => setTimeout(r, 200));
    const transport = mailer(s.smtp.port, s.cred);
    await expect(transport.verify()).resolves.toBe(true);
    const doneAtAuth = done;
    transport.close();

    const results = await Promise.all(creations);
    expect(results.map((r) => r.statusCode)).toEqual(new Array(FLOOD).fill(201));
    // One AUTH is one scrypt hash plus a TLS handshake, about one key generation's work: with
    // generations queued one at a time it finishes after a handful of them, not behind all 40
    // (before the queue it waited for nearly every one: the pool runs jobs in arrival order).
    expect(doneAtAuth, `creations finished when AUTH completed: ${doneAtAuth}/${FLOOD}`).toBeLessThan(FLOOD / 2);
  }, 180_000);
});

describe('domains per tenant', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ env: { POSTYARD_MAX_DOMAINS_PER_TENANT: '3' } });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  const add = (key: string, domain: string, headers: Record<string, string> = {}) =>
    call(ctx.app, 'POST', '/v1/sending-domains', { key, body: { domain }, headers });

  it('a tenant at POSTYARD_MAX_DOMAINS_PER_TENANT gets 409 domain_limit_reached; deleting one makes room', async () => {
    const t = await createTenant(ctx);
    const tag = unique();
    const ids: string[] = [];
    const lastKey = { 'idempotency-key': `cap-${tag}` };
    for (let i = 0; i < 3; i++) {
      const res = await add(t.apiKey, `cap${i}-${tag}.example.test`, i === 2 ? lastKey : {});
      expect(res.statusCode).toBe(201);
      ids.push(res.json().id);
    }
    const refused = await add(t.apiKey, `cap3-${tag}.example.test`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().errors[0]).toMatchObject({ code: 'domain_limit_reached' });
    expect(refused.json().errors[0].message).toMatch(/3 sending domains/);
    // At the cap, a retry of the request that made the last domain still gets its first answer.
    const replay = await add(t.apiKey, `cap2-${tag}.example.test`, lastKey);
    expect(replay.statusCode).toBe(201);
    expect(replay.json().id).toBe(ids[2]);

    // Another tenant has its own budget.
    const other = await createTenant(ctx);
    expect((await add(other.apiKey, `cap0-${tag}.example.test`)).statusCode).toBe(201);

    expect((await call(ctx.app, 'DELETE', `/v1/sending-domains/${ids[0]}`, { key: t.apiKey })).statusCode).toBe(204);
    expect((await add(t.apiKey, `cap3-${tag}.example.test`)).statusCode).toBe(201);
  });

  it('parallel creations never take a tenant past its cap', async () => {
    const t = await createTenant(ctx);
    const tag = unique();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => add(t.apiKey, `race${i}-${tag}.example.test`)),
    );
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes).toEqual([201, 201, 201, 409, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.statusCode === 409)) {
      expect(r.json().errors[0].code).toBe('domain_limit_reached');
    }
    const list = await call(ctx.app, 'GET', '/v1/sending-domains', { key: t.apiKey });
    expect(list.json().data).toHaveLength(3);
  });

  it('tenants.max_sending_domains overrides the default for one tenant', async () => {
    const t = await createTenant(ctx);
    await ctx.c.database.db
      .updateTable('tenants')
      .set({ max_sending_domains: 5 })
      .where('id', '=', t.tenantId)
      .execute();
    const tag = unique();
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) codes.push((await add(t.apiKey, `own${i}-${tag}.example.test`)).statusCode);
    expect(codes).toEqual([201, 201, 201, 201, 201, 409]);
  });
});
