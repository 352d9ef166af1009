/// <reference types="vite/client" />
/**
 * Every /v1 route of the API, as data. The shared security suite (security-suite.ts) runs each
 * entry through: no token, bad token, deleted key, wrong scope, and (for routes with path
 * parameters) another tenant's id. Tests compare this table with the OpenAPI document and the
 * routes Fastify serves, so a route added without an entry fails CI.
 *
 * Each module declares its entries beside its tests, in test/<module>/routes.ts, as an exported
 * `<NAME>_ROUTES: RouteSpec[]`; this file collects every such export (nothing to register here).
 * An entry is one line, e.g.
 *   { method: 'DELETE', path: '/v1/webhooks/:id', scopes: ['manage:webhooks'], makeId: webhookId },
 * where `webhookId` (ctx, tenant) => Promise<string> creates a webhook of `tenant` and returns its id.
 */
import type { RouteSpec } from './route-spec.ts';

export type { HttpMethod, MakeId, RouteSpec } from './route-spec.ts';

/** Where a module's entries go (named in the coverage tests' failure messages). */
export const CATALOG_FILES = 'test/<module>/routes.ts';

const modules = import.meta.glob<Record<string, unknown>>('../*/routes.ts', { eager: true });

function collect(): RouteSpec[] {
  const out: RouteSpec[] = [];
  for (const file of Object.keys(modules).sort()) {
    const lists = Object.entries(modules[file] ?? {}).filter(([name]) => name.endsWith('_ROUTES'));
    if (lists.length === 0) throw new Error(`${file} exports no <NAME>_ROUTES list of route-catalog entries`);
    for (const [name, list] of lists) {
      if (!Array.isArray(list)) throw new Error(`${file}: ${name} is not an array of route-catalog entries`);
      out.push(...(list as RouteSpec[]));
    }
  }
  return out;
}

export const ROUTES: RouteSpec[] = collect();

/** Routes served under /v1 that are deliberately public (no token) and need no catalog entry. */
export const PUBLIC_V1_ROUTES: Pick<RouteSpec, 'method' | 'path'>[] = [{ method: 'GET', path: '/v1/openapi.json' }];

export function routeName(r: Pick<RouteSpec, 'method' | 'path'>): string {
  return `${r.method} ${r.path}`;
}

/** The concrete URL of `route`, its parameters filled from makeId's result. */
export function fillPath(path: string, ids: string | Record<string, string>): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, (_m, name: string) =>
    encodeURIComponent(typeof ids === 'string' ? ids : (ids[name] ?? `missing-${name}`)),
  );
}

export function hasParams(path: string): boolean {
  return /:[A-Za-z0-9_]+/.test(path);
}

/** OpenAPI `/v1/things/{id}` -> Fastify `/v1/things/:id`. */
export function openApiToFastify(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ':$1');
}
