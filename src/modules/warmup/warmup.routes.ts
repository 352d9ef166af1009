import type { WarmupPoliciesService } from './warmup.service.ts';
import type { Database } from '../../db/index.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import type { TypedApp } from '../../http/route-module.ts';
import {
  CREATE_POLICY_DOCS,
  DELETE_POLICY_DOCS,
  GET_POLICY_DOCS,
  LIST_POLICIES_DOCS,
  UPDATE_POLICY_DOCS,
} from './warmup.examples.ts';
import { CreateWarmupBody, UpdateWarmupBody, WarmupPolicy } from './warmup.schema.ts';

/** What the warmup policy routes need. */
export interface WarmupRoutesDeps {
  warmupPolicies: WarmupPoliciesService;
  idempotency: IdempotencyService;
  database: Database;
}

/** The warmup-policy use cases the /v1 routes call (http/crud-routes.ts). */
const WARMUP_POLICIES: CrudResource<typeof CreateWarmupBody, typeof UpdateWarmupBody, WarmupRoutesDeps> = {
  createBody: CreateWarmupBody,
  updateBody: UpdateWarmupBody,
  create: async (c, caller, input) => (db) => c.warmupPolicies.create(db, caller.tenantId, input),
  service: (c) => c.warmupPolicies,
};

/** /v1/warmup-policies (docs/api.md "Warmup policies", docs/ip-pools.md "Warmup"). */
export function registerWarmupRoutes(app: TypedApp, c: WarmupRoutesDeps) {
  registerCrudRoutes(app, c, {
    ...WARMUP_POLICIES,
    path: '/v1/warmup-policies',
    scopes: ['manage:pacing'],
    tags: ['Warmup policies'],
    view: WarmupPolicy,
    resource: 'warmupPolicies',
    summaries: {
      create: 'Create a warmup policy (stages of daily and hourly limits per address)',
      list: 'List warmup policies, newest first',
      get: 'Get a warmup policy',
      update: 'Change a warmup policy; `stages` replaces the whole list',
      delete: 'Delete a warmup policy (409 while a pool address uses it)',
    },
    docs: {
      create: CREATE_POLICY_DOCS,
      list: LIST_POLICIES_DOCS,
      get: GET_POLICY_DOCS,
      update: UPDATE_POLICY_DOCS,
      delete: DELETE_POLICY_DOCS,
    },
    conflicts: ['update', 'delete'],
  });
}
