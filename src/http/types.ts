import type { RouteDocs } from './openapi/enrich.ts';

/** Who calls a /v1 route: the tenant, the API key and its scopes (set by the auth plugin). */
export interface AuthContext {
  tenantId: string;
  keyId: string;
  scopes: ReadonlySet<string>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Any one of these scopes grants access. Routes under /v1 without scopes are refused. */
    scopes?: readonly string[];
    /** Skips bearer auth (health, metrics, OpenAPI). */
    public?: boolean;
    /** Accepts multipart/form-data besides JSON. */
    multipart?: boolean;
    /** Examples and extra error codes for the OpenAPI document (src/http/openapi/enrich.ts). */
    openapi?: RouteDocs;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
    startedAt: bigint;
  }
}
