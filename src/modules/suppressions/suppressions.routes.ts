import type { MultipartFile } from '@fastify/multipart';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import { AppError, validationError } from '../../lib/errors.ts';
import {
  MAX_DESCRIPTION_CHARS,
  MAX_IMPORT_ERRORS,
  MAX_IMPORT_ROWS,
  MAX_UPSERT_ITEMS,
  REASON_CATEGORIES,
  SUPPRESSION_SOURCES,
  SUPPRESSION_TYPES,
} from './suppressions.service.ts';

const SCOPE = ['manage:suppressions'] as const;

const Suppression = Type.Object({
  id: Type.String(),
  identifier: Type.String(),
  type: Type.String({ enum: [...SUPPRESSION_TYPES] }),
  reason_category: Type.String({ enum: [...REASON_CATEGORIES] }),
  description: Type.Union([Type.String(), Type.Null()]),
  source: Type.String({ enum: [...SUPPRESSION_SOURCES] }),
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
        `CSV with header row identifier,type,reason_category,description (only identifier required; type ` +
        `defaults to email, reason_category to manual). Up to ${MAX_IMPORT_ROWS} rows.`,
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

/** Multipart bodies larger than the file limit by more than this (boundaries, part headers) are refused up front. */
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

function tooLarge(limitBytes: number): AppError {
  return new AppError(
    'payload_too_large',
    `The import file is larger than the limit of ${Math.round(limitBytes / 1024 / 1024)} MB`,
    { field: 'file' },
  );
}

function malformedMultipart(err: unknown): AppError {
  const detail = err instanceof Error ? `: ${err.message}` : '';
  return validationError([{ field: 'file', message: `The multipart body could not be read${detail}`.slice(0, 300) }]);
}

/**
 * Errors of the multipart layer as contract errors: ours pass through, @fastify/multipart's limit
 * errors (too many parts, files or fields: status 413) become payload_too_large, its other client
 * errors keep their status, and anything else (busboy: a broken body) is a 422 on `file`.
 */
function multipartFailure(err: unknown): unknown {
  if (err instanceof AppError) return err;
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (status === 413) {
    return new AppError('payload_too_large', (err as Error).message || 'The multipart body has too many parts');
  }
  if (typeof status === 'number' && status >= 400 && status < 500) return err;
  return malformedMultipart(err);
}

/**
 * The file part as chunks. Stops with 413 the moment busboy truncates it at the size limit, so
 * no cut-off last row is ever imported; read errors (a broken multipart body) become 422.
 */
async function* fileChunks(part: MultipartFile, limitBytes: number): AsyncGenerator<Buffer> {
  const file = part.file;
  try {
    for await (const chunk of file) {
      if (file.truncated) throw tooLarge(limitBytes);
      yield chunk as Buffer;
    }
  } catch (err) {
    throw multipartFailure(err);
  }
  if (file.truncated) throw tooLarge(limitBytes);
}

/**
 * CSV import. Idempotency-Key is refused rather than half-honoured: the import commits in many
 * batches (one transaction per few thousand rows), so it cannot share one transaction with a
 * stored response, and the body is a stream we could only fingerprint after importing it.
 * Imports are upserts, so repeating one is safe without a key.
 */
export async function importCsv(c: Container, req: FastifyRequest, reply: FastifyReply, tenantId: string) {
  if (req.headers['idempotency-key'] !== undefined) {
    throw new AppError(
      'invalid_idempotency_key',
      'Idempotency-Key is not supported for multipart imports; imports are upserts and safe to repeat',
      { field: 'Idempotency-Key' },
    );
  }
  const limit = c.config.importLimitBytes;
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit + MULTIPART_OVERHEAD_BYTES) throw tooLarge(limit);

  let part: MultipartFile | undefined;
  try {
    part = await req.file();
  } catch (err) {
    throw multipartFailure(err);
  }
  if (part?.fieldname !== 'file') {
    throw validationError([{ field: 'file', message: 'A CSV file part named "file" is required' }]);
  }
  const result = await c.suppressions.importCsv(tenantId, fileChunks(part, limit));
  return reply.code(200).send(result);
}

export function registerSuppressionRoutes(app: TypedApp, c: Container) {
  app.post<UpsertRequest>(
    '/v1/suppressions',
    {
      config: {
        scopes: SCOPE,
        multipart: true,
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
        summary: 'List suppressions, newest first',
        querystring: Type.Object({
          ...PageQuery,
          type: Type.Optional(Type.String({ enum: [...SUPPRESSION_TYPES] })),
          reason_category: Type.Optional(Type.String({ enum: [...REASON_CATEGORIES] })),
          identifier: Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: 320,
              description: 'Exact match after normalization (an email when it holds "@", else a domain).',
            }),
          ),
        }),
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
