/** Examples of the /v1/pacing operations for the OpenAPI document (route config `openapi`). */
import type { RouteDocs } from '../../http/openapi/index.ts';

// The shipped config/pacing.yaml values of the yahoo site.
const defaults = {
  max_connections: 5,
  messages_per_connection: 20,
  messages_per_minute: 600,
  messages_per_hour: 20000,
};
const yahoo = {
  site: 'yahoo',
  mx: ['.yahoodns.net', '.yahoo.com', '.aol.com'],
  max_connections: 2,
  messages_per_connection: null,
  messages_per_minute: 300,
  messages_per_hour: null,
  defaults,
  effective: { ...defaults, max_connections: 2, messages_per_minute: 300 },
  updated_at: '2026-11-26T10:00:00.000Z',
};
const gmail = {
  site: 'gmail',
  mx: ['.google.com', '.googlemail.com'],
  max_connections: null,
  messages_per_connection: null,
  messages_per_minute: null,
  messages_per_hour: null,
  defaults: { max_connections: 10, messages_per_connection: 100, messages_per_minute: 3000, messages_per_hour: 100000 },
  effective: {
    max_connections: 10,
    messages_per_connection: 100,
    messages_per_minute: 3000,
    messages_per_hour: 100000,
  },
  updated_at: null,
};

export const LIST_SITES_DOCS: RouteDocs = { responses: { 200: { data: [gmail, yahoo], next_cursor: null } } };

export const GET_SITE_DOCS: RouteDocs = { responses: { 200: yahoo } };

export const PUT_SITE_DOCS: RouteDocs = {
  request: { max_connections: 2, messages_per_minute: 300 },
  responses: { 200: yahoo },
};

export const LIST_SUSPENSIONS_DOCS: RouteDocs = {
  responses: {
    200: {
      data: [
        {
          site: 'yahoo',
          source_address: '192.0.2.25',
          rule: 'yahoo-tss04',
          action: 'suspend',
          factor: 1,
          reason: '421 4.7.0 [TSS04] Messages from 192.0.2.25 temporarily deferred due to unexpected volume',
          started_at: '2026-11-26T10:00:00.000Z',
          until: '2026-11-26T11:00:00.000Z',
        },
      ],
      next_cursor: null,
    },
  },
};
