/**
 * The CSV upload of suppressions over multipart (POST /v1/suppressions and the dashboard's
 * import): size limits, multipart errors as contract errors, the file part streamed to the
 * service's importer.
 */
import type { MultipartFile } from '@fastify/multipart';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError, validationError } from '../../lib/errors.ts';
import type { SuppressionsService } from './suppressions.service.ts';

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
/** What the CSV import needs. */
export interface CsvImportDeps {
  config: Pick<Config, 'importLimitBytes'>;
  suppressions: Pick<SuppressionsService, 'importCsv'>;
}

export async function importCsv(c: CsvImportDeps, req: FastifyRequest, reply: FastifyReply, tenantId: string) {
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
