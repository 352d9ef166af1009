import type { AddressInfo } from 'node:net';
import { Postyard, type PostyardOptions } from '@postyard/client';
import {
  createTenant,
  createTestContext,
  type TestContext,
  type TestContextOptions,
  type TestTenant,
} from '../helpers/context.ts';
import { FaultProxy } from './fault-proxy.ts';

/** The real server listening on loopback, a tenant, and a fault-injecting proxy in front of it. */
export interface LiveServer {
  ctx: TestContext;
  tenant: TestTenant;
  /** The server itself. */
  baseUrl: string;
  proxy: FaultProxy;
  /** A client through the proxy with short backoff (tests should not sleep for seconds). */
  client(opts?: Partial<PostyardOptions>): Postyard;
  close(): Promise<void>;
}

export async function startLiveServer(opts: TestContextOptions = {}): Promise<LiveServer> {
  const ctx = await createTestContext(opts);
  await ctx.app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
  const tenant = await createTenant(ctx);
  const proxy = await FaultProxy.start(baseUrl);
  return {
    ctx,
    tenant,
    baseUrl,
    proxy,
    client: (opts = {}) =>
      new Postyard({ apiKey: tenant.apiKey, baseUrl: proxy.url, backoff: { baseMs: 10, maxMs: 40 }, ...opts }),
    async close() {
      await proxy.close();
      await ctx.close();
    },
  };
}

export async function countRows(
  ctx: TestContext,
  table: 'transmissions' | 'webhooks' | 'api_keys' | 'suppressions',
  tenantId: string,
): Promise<number> {
  const row = await ctx.c.database.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export const MAIL = {
  recipients: [{ email: 'ann@example.com' }],
  content: { subject: 'Hello', text: 'Hi Ann' },
};
