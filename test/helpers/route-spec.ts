/**
 * The format of route-catalog entries (test/helpers/route-catalog.ts collects them from each
 * module's test/<module>/routes.ts) and the helpers their id factories share.
 */
import type { TestContext, TestTenant } from './context.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Creates a resource owned by `tenant` and returns its id (or the values of every path parameter). */
export type MakeId = (ctx: TestContext, tenant: TestTenant) => Promise<string | Record<string, string>>;

export interface RouteSpec {
  method: HttpMethod;
  /** Fastify pattern, e.g. /v1/api-keys/:id */
  path: string;
  /** Any one of these scopes grants access (the scope table of docs/api.md). */
  scopes: string[];
  /** A body that passes validation for a key holding exactly `scopes[0]`. */
  sampleBody?: unknown;
  /** Content-Type of sampleBody when it is not JSON (e.g. multipart imports); sampleBody is then sent raw. */
  contentType?: string;
  /** Required for routes with path parameters: creates the resource the path points at. */
  makeId?: MakeId;
  /**
   * The path parameter names something every tenant has, not a tenant's resource (a destination
   * site of the pacing file): another tenant gets its own view, not a 404, so the suite skips its
   * "another tenant's id" check; the module's tests prove that view shows nothing of the owner's.
   */
  sharedParam?: true;
}

/** POSTs `body` as `tenant` and returns the id of what it created. */
export async function createVia(ctx: TestContext, tenant: TestTenant, url: string, body: unknown): Promise<string> {
  const res = await ctx.app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  if (res.statusCode >= 300) throw new Error(`makeId: POST ${url} answered ${res.statusCode}: ${res.body}`);
  const id = (res.json() as { id?: string }).id;
  if (!id) throw new Error(`makeId: POST ${url} returned no id: ${res.body}`);
  return id;
}
