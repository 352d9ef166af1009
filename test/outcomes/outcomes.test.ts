import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyBounce } from '../../src/modules/outcomes/bounce-rules.ts';
import { recordOutcomes } from '../../src/modules/outcomes/outcomes.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

/**
 * What a remote MX says is stored as text. A reply holding U+0000 (a broken or hostile server)
 * must not fail the outcome batch: on PostgreSQL text cannot hold it, and a failed batch would
 * leave its messages leased, to be sent again after the lease.
 */
let ctx: TestContext;
let t: TestTenant;
beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

describe('recordOutcomes and remote text', () => {
  it('stores a bounce whose reply and transcript hold NUL characters, with them replaced', async () => {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: 'nul@dest.test' }], content: { subject: 's', text: 't' } },
    });
    expect(res.statusCode).toBe(202);
    const msg = await ctx.c.database.db
      .updateTable('messages')
      .set({ state: 'sending', locked_by: 'w1', locked_until: new Date(Date.now() + 60_000).toISOString() })
      .where('transmission_id', '=', res.json().transmission_id)
      .returningAll()
      .executeTakeFirstOrThrow();
    const reply = '550 5.1.1 No\u0000such user';
    const written = await recordOutcomes(ctx.c.database, ctx.c.suppressions, 'w1', [
      {
        msg,
        mailType: 'transactional',
        tags: [],
        kind: 'bounced',
        bounce: classifyBounce({ code: 550, enhancedCode: '5.1.1', text: reply }),
        diagnostic: reply,
        attempt: {
          startedAt: new Date().toISOString(),
          finishedAt: new Date().toISOString(),
          mxHost: 'mx.dest.test',
          address: '127.0.0.1',
          tls: false,
          smtpCode: 550,
          enhancedCode: '5.1.1',
          response: reply,
          transcript: ['C: RCPT TO:<nul@dest.test>', `S: ${reply}`],
        },
      },
    ]);
    expect(written).toBe(1);
    const view = (await call(ctx.app, 'GET', `/v1/messages/${msg.id}`, { key: t.apiKey })).json();
    expect(view.state).toBe('bounced');
    expect(view.attempts[0].response).toBe('550 5.1.1 No\uFFFDsuch user');
    expect(view.attempts[0].transcript).toContain('S: 550 5.1.1 No\uFFFDsuch user');
    // The automatic suppression (5.1.1) was added too, its description cleaned the same way.
    const sup = await ctx.c.database.db
      .selectFrom('suppressions')
      .selectAll()
      .where('tenant_id', '=', t.tenantId)
      .execute();
    expect(sup.map((s) => s.identifier)).toEqual(['nul@dest.test']);
    expect(sup[0]?.description).not.toContain('\u0000');
  });
});
