import type { ApiKeysService } from './api-keys.service.ts';
import type { Database } from '../../db/index.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { type TSchema, Type } from '@sinclair/typebox';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { SCOPES } from './scopes.ts';

/** What the API key routes (/v1 and dashboard) need. */
export interface ApiKeyRoutesDeps {
  apiKeys: ApiKeysService;
  idempotency: IdempotencyService;
  database: Database;
}

const SCOPE = ['manage:api-keys'] as const;

const ApiKey = Type.Object({
  id: Type.String(),
  name: Type.String(),
  scopes: Type.Array(Type.String()),
  key_prefix: Type.String(),
  created_at: Type.String(),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
});

const CreatedApiKey = Type.Object({
  ...ApiKey.properties,
  key: Type.Union([Type.String(), Type.Null()], { description: 'The raw key: shown once, null in replays.' }),
});

const CreateApiKeyBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    scopes: Type.Array(Type.String({ enum: [...SCOPES] }), { minItems: 1, maxItems: SCOPES.length * 2 }),
  },
  { additionalProperties: false },
);

/** The API key use cases the /v1 and dashboard routes share (http/crud-routes.ts). */
export const API_KEYS: CrudResource<typeof CreateApiKeyBody, TSchema, ApiKeyRoutesDeps> = {
  createBody: CreateApiKeyBody,
  // A key can grant only scopes its creator holds (a dashboard user holds them all).
  create: async (c, caller, input) => (db) => c.apiKeys.create(caller.tenantId, input, caller.scopes, db),
  service: (c) => c.apiKeys,
};

export function registerApiKeyRoutes(app: TypedApp, c: ApiKeyRoutesDeps) {
  registerCrudRoutes(app, c, {
    ...API_KEYS,
    path: '/v1/api-keys',
    scopes: SCOPE,
    tags: ['API keys'],
    view: ApiKey,
    created: CreatedApiKey,
    secretFields: ['key'],
    resource: 'apiKeys',
    summaries: {
      create: 'Create an API key (the raw key is returned once)',
      list: 'List API keys (never the raw key)',
      delete: 'Delete (revoke) an API key',
    },
  });
}
