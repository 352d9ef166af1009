/** Examples of the /v1/ip-pools operations for the OpenAPI document (route config `openapi`). */
import type { RouteDocs } from '../../http/openapi/index.ts';

const POOL = '0193a5b2-4444-7d4a-9f3b-2c8e4d6a1b90';
const OVERFLOW = '0193a5b2-5555-7d4a-9f3b-2c8e4d6a1b90';
const POLICY = '0193a5b2-6666-7d4a-9f3b-2c8e4d6a1b90';

const pool = {
  id: POOL,
  name: 'marketing',
  addresses: [
    { address: '192.0.2.25', weight: 3, warmup_policy_id: null, flags: [] },
    { address: '192.0.2.26', weight: 1, warmup_policy_id: POLICY, flags: [] },
  ],
  overflow_pool_id: OVERFLOW,
  default: false,
  mail_types: ['marketing'],
  created_at: '2026-11-26T10:00:00.000Z',
  updated_at: '2026-11-26T10:00:00.000Z',
};

export const CREATE_POOL_DOCS: RouteDocs = {
  errors: ['name_taken'],
  request: {
    name: 'marketing',
    addresses: [
      { address: '192.0.2.25', weight: 3 },
      { address: '192.0.2.26', weight: 1, warmup_policy_id: POLICY },
    ],
    overflow_pool_id: OVERFLOW,
    mail_types: ['marketing'],
  },
  responses: { 201: pool },
};

export const LIST_POOLS_DOCS: RouteDocs = { responses: { 200: { data: [pool], next_cursor: null } } };

export const GET_POOL_DOCS: RouteDocs = { responses: { 200: pool } };

export const UPDATE_POOL_DOCS: RouteDocs = {
  errors: ['name_taken'],
  request: { addresses: [{ address: '192.0.2.25', weight: 1 }], overflow_pool_id: null },
  responses: {
    200: {
      ...pool,
      addresses: [{ address: '192.0.2.25', weight: 1, warmup_policy_id: null, flags: [] }],
      overflow_pool_id: null,
      updated_at: '2026-11-26T11:30:00.000Z',
    },
  },
};

export const DELETE_POOL_DOCS: RouteDocs = { errors: ['in_use'] };
