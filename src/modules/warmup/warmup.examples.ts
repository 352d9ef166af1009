/** Examples of the /v1/warmup-policies operations for the OpenAPI document (route config `openapi`). */
import type { RouteDocs } from '../../http/openapi/index.ts';

const POLICY = '0193a5b2-6666-7d4a-9f3b-2c8e4d6a1b90';

const stages = [
  { day: 1, daily_limit: 200, hourly_limit: 20 },
  { day: 3, daily_limit: 1000, hourly_limit: 100 },
  { day: 7, daily_limit: 10000, hourly_limit: null },
];
const policy = {
  id: POLICY,
  name: 'new address, 7 days',
  stages,
  max_bounce_rate: 0.05,
  max_complaint_rate: 0.001,
  created_at: '2026-11-26T10:00:00.000Z',
  updated_at: '2026-11-26T10:00:00.000Z',
};

export const CREATE_POLICY_DOCS: RouteDocs = {
  errors: ['name_taken'],
  request: { name: 'new address, 7 days', stages, max_bounce_rate: 0.05, max_complaint_rate: 0.001 },
  responses: { 201: policy },
};

export const LIST_POLICIES_DOCS: RouteDocs = { responses: { 200: { data: [policy], next_cursor: null } } };

export const GET_POLICY_DOCS: RouteDocs = { responses: { 200: policy } };

export const UPDATE_POLICY_DOCS: RouteDocs = {
  errors: ['name_taken'],
  request: { max_bounce_rate: 0.03 },
  responses: { 200: { ...policy, max_bounce_rate: 0.03, updated_at: '2026-11-26T11:30:00.000Z' } },
};

export const DELETE_POLICY_DOCS: RouteDocs = { errors: ['in_use'] };
