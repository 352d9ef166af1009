import { type Static, Type } from '@sinclair/typebox';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, pageOf, pageQuery } from '../../http/schemas.ts';
import {
  MAX_DESCRIPTION_CHARS,
  MAX_IMPORT_ERRORS,
  MAX_IMPORT_ROWS,
  MAX_UPSERT_ITEMS,
  REASON_CATEGORIES,
  SUPPRESSION_SCOPES,
  SUPPRESSION_SOURCES,
  SUPPRESSION_TYPES,
} from './suppressions.service.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { type CsvImportDeps, importCsv } from './csv-upload.ts';
import type { SuppressionsService } from './suppressions.service.ts';
import { SuppressionsQuery } from './suppressions.schema.ts';

const SCOPE = ['manage:suppressions'] as const;

const Suppression = Type.Object({
  id: Type.String(),
  identifier: Type.String(),
  type: Type.String({ enum: [...SUPPRESSION_TYPES] }),
  reason_category: Type.String({ enum: [...REASON_CATEGORIES] }),
  description: Type.Union([Type.String(), Type.Null()]),
  source: Type.String({ enum: [...SUPPRESSION_SOURCES] }),
  scope: Type.String({
    enum: [...SUPPRESSION_SCOPES],
    description: 'all: no mail is sent to it; marketing: only marketing mail is withheld (an unsubscribe).',
  }),
  created_at: Type.String(),
  updated_at: Type.String(),
});

const UpsertBody = Type.Object(
  {
    items: Type.Array(
      Type.Object(
        {
          identifier: Type.String({
            minLength: 1,
            maxLength: 320,
            description: 'An email address, or a domain when type is domain. Normalized: trimmed, domain lower-cased.',
          }),
          type: Type.String({ enum: [...SUPPRESSION_TYPES] }),
          reason_category: Type.String({ enum: [...REASON_CATEGORIES] }),
          description: Type.Optional(Type.Union([Type.String({ maxLength: MAX_DESCRIPTION_CHARS }), Type.Null()])),
          scope: Type.Optional(Type.String({ enum: [...SUPPRESSION_SCOPES], description: 'Default all.' })),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_UPSERT_ITEMS },
    ),
  },
  { additionalProperties: false },
);
/**
 * The body is declared per content type (JSON validated, multipart streamed), a form the type
 * provider cannot read, so the route names its JSON body type itself.
 */
type UpsertRequest = { Body: Static<typeof UpsertBody> };

/** Only for the OpenAPI document: the multipart body is read as a stream, never validated as a whole. */
const ImportForm = Type.Object(
  {
    file: Type.String({
      contentEncoding: 'binary',
      contentMediaType: 'text/csv',
      description:
        `CSV with header row identifier,type,reason_category,description[,scope] (only identifier required; type ` +
        `defaults to email, reason_category to manual, scope to all). Up to ${MAX_IMPORT_ROWS} rows.`,
    }),
  },
  { required: ['file'] },
);

const UpsertResult = Type.Object(
  { created: Type.Integer(), updated: Type.Integer() },
  { title: 'UpsertResult', description: 'Answer to a JSON request.' },
);
const ImportResult = Type.Object(
  {
    imported: Type.Integer(),
    skipped: Type.Integer(),
    errors: Type.Array(Type.Object({ line: Type.Integer(), message: Type.String() }), {
      description: `The first ${MAX_IMPORT_ERRORS} bad rows by physical line (header = line 1).`,
    }),
  },
  { title: 'ImportResult', description: 'Answer to a multipart CSV import.' },
);

/** What the suppression routes need. */
export interface SuppressionRoutesDeps extends CsvImportDeps {
  suppressions: SuppressionsService;
  idempotency: IdempotencyService;
}

export function registerSuppressionRoutes(app: TypedApp, c: SuppressionRoutesDeps) {
  app.post<UpsertRequest>(
    '/v1/suppressions',
    {
      config: {
        scopes: SCOPE,
        multipart: true,
        openapi: {
          request: {
            items: [
              {
                identifier: 'ann@example.com',
                type: 'email',
                reason_category: 'manual',
                description: 'asked by phone',
              },
              { identifier: 'old-domain.example', type: 'domain', reason_category: 'manual' },
            ],
          },
          responses: { 200: { created: 2, updated: 0 } },
        },
        // Validation only knows the JSON body (a multipart request has no parsed body to check);
        // the document describes both.
        swaggerTransform: ({ schema, url }) => ({
          url,
          schema: {
            ...schema,
            body: {
              content: {
                'application/json': { schema: UpsertBody },
                'multipart/form-data': { schema: ImportForm },
              },
            },
          } as typeof schema,
        }),
      },
      schema: {
        tags: ['Suppressions'],
        operationId: 'suppressions.upsert',
        summary: 'Add or update suppressions (JSON, all or nothing) or import a CSV file (multipart)',
        description:
          `JSON: {"items":[...]} with 1 to ${MAX_UPSERT_ITEMS} items, upserted in one transaction; one bad item ` +
          'rejects the whole request (422 naming items[i]...). Answer {"created","updated"}. ' +
          'Multipart: one file part named "file" holding CSV, streamed and upserted in batches; bad rows are ' +
          'skipped and reported by line. Answer {"imported","skipped","errors"}. Idempotency-Key is honoured ' +
          'for JSON and refused (400) for multipart; imports are upserts and safe to repeat.',
        headers: IdempotencyHeader,
        body: { content: { 'application/json': { schema: UpsertBody } } },
        response: { 200: Type.Union([UpsertResult, ImportResult]), ...errorResponses(409, 413, 415, 422) },
      },
    },
    async (req, reply) => {
      const tenantId = authOf(req).tenantId;
      if (req.isMultipart()) return importCsv(c, req, reply, tenantId);
      // Validated before the transaction opens: a 422 costs no database time.
      const items = c.suppressions.prepareItems(req.body.items);
      return replyIdempotent(c, req, reply, async (trx) => ({
        status: 200,
        body: await c.suppressions.upsertPrepared(tenantId, items, trx),
      }));
    },
  );

  app.get(
    '/v1/suppressions',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['Suppressions'],
        operationId: 'suppressions.list',
        summary: 'List suppressions, newest first',
        querystring: SuppressionsQuery,
        response: { 200: pageOf(Suppression), ...errorResponses() },
      },
    },
    async (req) => {
      return c.suppressions.list(authOf(req).tenantId, pageQuery(req.query));
    },
  );

  app.get(
    '/v1/suppressions/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['Suppressions'],
        operationId: 'suppressions.get',
        summary: 'Get a suppression',
        params: IdParams,
        response: { 200: Suppression, ...errorResponses(404) },
      },
    },
    async (req) => c.suppressions.get(authOf(req).tenantId, req.params.id),
  );

  app.delete(
    '/v1/suppressions/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['Suppressions'],
        operationId: 'suppressions.delete',
        summary: 'Delete a suppression (sending to it is allowed again)',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await c.suppressions.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );
}
