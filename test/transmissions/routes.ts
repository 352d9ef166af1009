/** Route-catalog entries of /v1/transmissions and /v1/messages (collected by test/helpers/route-catalog.ts). */
import type { TestContext, TestTenant } from '../helpers/context.ts';
import type { MakeId, RouteSpec } from '../helpers/route-spec.ts';

const TX_READ = ['send:transmissions', 'read:events'];

async function sendOne(ctx: TestContext, t: TestTenant): Promise<{ transmissionId: string; messageId: string }> {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/v1/transmissions',
    headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ recipients: [{ email: 'catalog@example.com' }], content: { subject: 's', text: 't' } }),
  });
  if (res.statusCode !== 202) throw new Error(`makeId: POST /v1/transmissions answered ${res.statusCode}: ${res.body}`);
  const transmissionId = (res.json() as { transmission_id: string }).transmission_id;
  const msg = await ctx.c.database.db
    .selectFrom('messages')
    .select('id')
    .where('transmission_id', '=', transmissionId)
    .executeTakeFirstOrThrow();
  return { transmissionId, messageId: msg.id };
}
export const transmissionId: MakeId = async (ctx, t) => (await sendOne(ctx, t)).transmissionId;
export const messageId: MakeId = async (ctx, t) => (await sendOne(ctx, t)).messageId;

export const TRANSMISSION_ROUTES: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/transmissions',
    scopes: ['send:transmissions'],
    sampleBody: { recipients: [{ email: 'a@example.com' }], content: { subject: 's', text: 't' } },
  },
  { method: 'GET', path: '/v1/transmissions/:id', scopes: TX_READ, makeId: transmissionId },
  { method: 'GET', path: '/v1/messages/:id', scopes: TX_READ, makeId: messageId },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
export const DASHBOARD_ID_CHECKS = [
  { method: 'GET' as const, path: '/dashboard/api/messages/:id', makeId: messageId },
  { method: 'GET' as const, path: '/dashboard/api/transmissions/:id', makeId: transmissionId },
];
