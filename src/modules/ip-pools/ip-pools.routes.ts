import type { SourceAddresses } from './source-addresses.ts';
import type { IpPoolsService } from './ip-pools.service.ts';
import type { Database } from '../../db/index.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import type { TypedApp } from '../../http/route-module.ts';
import {
  CREATE_POOL_DOCS,
  DELETE_POOL_DOCS,
  GET_POOL_DOCS,
  LIST_POOLS_DOCS,
  UPDATE_POOL_DOCS,
} from './ip-pools.examples.ts';
import { CreatePoolBody, IpPool, UpdatePoolBody } from './ip-pools.schema.ts';

/** What the IP pool routes (/v1 and dashboard) need. */
export interface IpPoolRoutesDeps {
  ipPools: IpPoolsService;
  sourceAddresses: SourceAddresses;
  idempotency: IdempotencyService;
  database: Database;
}

/** The IP pool use cases the /v1 and dashboard routes share (http/crud-routes.ts). */
export const IP_POOLS: CrudResource<typeof CreatePoolBody, typeof UpdatePoolBody, IpPoolRoutesDeps> = {
  createBody: CreatePoolBody,
  updateBody: UpdatePoolBody,
  create: async (c, caller, input) => (db) => c.ipPools.create(db, caller.tenantId, input),
  service: (c) => c.ipPools,
};

/** /v1/ip-pools (docs/api.md "IP pools", docs/ip-pools.md): the five routes of a named resource. */
export function registerIpPoolRoutes(app: TypedApp, c: IpPoolRoutesDeps) {
  registerCrudRoutes(app, c, {
    ...IP_POOLS,
    path: '/v1/ip-pools',
    scopes: ['manage:ip-pools'],
    tags: ['IP pools'],
    view: IpPool,
    resource: 'ipPools',
    summaries: {
      create: "Create an IP pool from this host's source addresses",
      list: 'List IP pools, newest first',
      get: 'Get an IP pool',
      update: 'Change an IP pool; `addresses` replaces the whole list',
      delete: 'Delete an IP pool (409 while another pool overflows into it)',
    },
    docs: {
      create: CREATE_POOL_DOCS,
      list: LIST_POOLS_DOCS,
      get: GET_POOL_DOCS,
      update: UPDATE_POOL_DOCS,
      delete: DELETE_POOL_DOCS,
    },
    conflicts: ['update', 'delete'],
  });
}
