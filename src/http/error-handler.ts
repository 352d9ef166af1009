import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { type DatabaseFault, databaseFault } from '../db/faults.ts';
import { AppError, type ErrorCode, type ErrorDetail } from '../lib/errors.ts';
import { countDatabaseFault } from '../metrics/database-faults.ts';

/** The one place that knows which HTTP status each error code means. */
export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  invalid_json: 400,
  invalid_cursor: 400,
  invalid_idempotency_key: 400,
  invalid_parameter: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_reused: 409,
  idempotency_in_progress: 409,
  domain_limit_reached: 409,
  name_taken: 409,
  in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  sender_domain_not_verified: 422,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
  insufficient_storage: 507,
};

/**
 * Retry-After (seconds) of the answers to a database fault (src/db/faults.ts): an unreachable
 * database is often back within seconds (a restart, a failover); a full disk needs an operator.
 */
export const UNAVAILABLE_RETRY_AFTER_S = 5;
export const STORAGE_FULL_RETRY_AFTER_S = 30;

const MAX_DETAILS = 100;

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** "/recipients/2/email" -> "recipients[2].email" (the contract's field notation). */
export function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').filter(Boolean);
  if (extra !== undefined) parts.push(extra);
  let out = '';
  for (const p of parts) {
    const seg = p.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(seg) ? `[${seg}]` : out === '' ? seg : `.${seg}`;
  }
  return out;
}

function ajvToDetails(errors: AjvError[], prefix: string): ErrorDetail[] {
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
  for (const e of errors) {
    let field: string;
    let message: string;
    if (e.keyword === 'required') {
      field = fieldPath(e.instancePath, String(e.params.missingProperty));
      message = `${field} is required`;
    } else if (e.keyword === 'additionalProperties') {
      field = fieldPath(e.instancePath, String(e.params.additionalProperty));
      message = `${field} is not an allowed field`;
    } else {
      field = fieldPath(e.instancePath);
      message = `${field || prefix} ${e.message ?? 'is invalid'}`;
    }
    // anyOf/oneOf produce a cascade of errors for one field: keep the first per field.
    if (seen.has(field)) continue;
    seen.add(field);
    details.push({
      code: prefix === 'body' ? 'validation_failed' : 'invalid_parameter',
      message,
      ...(field ? { field } : {}),
    });
  }
  return details;
}

export function sendError(
  reply: FastifyReply,
  code: ErrorCode,
  details: ErrorDetail[],
  headers: Record<string, string> = {},
) {
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  if (code === 'unauthorized') reply.header('WWW-Authenticate', 'Bearer');
  // The rest of an oversized body is not read: the connection closes after the 413 (Fastify does
  // this for its JSON parser; a multipart import cut by the size limit needs it too, else the
  // whole upload was still received and discarded on the kept-alive connection).
  if (code === 'payload_too_large') reply.header('Connection', 'close');
  return reply
    .code(STATUS_BY_CODE[code])
    .type('application/json; charset=utf-8')
    .send({ errors: details.slice(0, MAX_DETAILS) });
}

function one(code: ErrorCode, message: string): ErrorDetail[] {
  return [{ code, message }];
}

/** Fastify's own errors (parser, limits) mapped to contract codes. */
function mapFastifyError(err: FastifyError): { code: ErrorCode; details: ErrorDetail[] } | null {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'FST_REQ_FILE_TOO_LARGE':
      return { code: 'payload_too_large', details: one('payload_too_large', 'Request body is larger than the limit') };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      if (err.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') {
        return { code: 'invalid_json', details: one('invalid_json', 'Content-Length does not match the body') };
      }
      return {
        code: 'unsupported_media_type',
        details: one('unsupported_media_type', 'Content-Type must be application/json'),
      };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { code: 'invalid_json', details: one('invalid_json', 'Request body is empty') };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { code: 'invalid_json', details: one('invalid_json', 'Request body is not valid JSON') };
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return { code: 'unsupported_media_type', details: one('unsupported_media_type', 'Expected multipart/form-data') };
    default:
      break;
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON|proto/i.test(err.message))) {
    return { code: 'invalid_json', details: one('invalid_json', 'Request body is not valid JSON') };
  }
  return null;
}

/** The answer to a request that failed for a database fault, or null for any other error. */
function faultAnswer(
  err: unknown,
): { kind: DatabaseFault; code: ErrorCode; message: string; retryAfter: number } | null {
  const kind = databaseFault(err);
  if (kind === 'unavailable')
    return {
      kind,
      code: 'unavailable',
      message: 'The database is unreachable; retry',
      retryAfter: UNAVAILABLE_RETRY_AFTER_S,
    };
  if (kind === 'storage_full')
    return {
      kind,
      code: 'insufficient_storage',
      message: 'The server is out of storage; retry later',
      retryAfter: STORAGE_FULL_RETRY_AFTER_S,
    };
  return null;
}

/** `metrics`: where database faults are counted (postyard_database_faults_total). */
export function installErrorHandler(app: FastifyInstance, metrics?: Registry) {
  app.setErrorHandler((err: FastifyError | AppError, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) return sendError(reply, err.code, err.details, err.headers);
    const fe = err as FastifyError & { validation?: AjvError[]; validationContext?: string };
    if (fe.validation) {
      const ctx = fe.validationContext ?? 'body';
      if (ctx === 'body') return sendError(reply, 'validation_failed', ajvToDetails(fe.validation, 'body'));
      if (ctx === 'params') return sendError(reply, 'not_found', one('not_found', 'Resource not found'));
      return sendError(reply, 'invalid_parameter', ajvToDetails(fe.validation, ctx));
    }
    const mapped = mapFastifyError(fe);
    if (mapped) return sendError(reply, mapped.code, mapped.details);
    const status = fe.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Any other client error Fastify raises: keep its status, never its internals.
      return reply
        .code(status)
        .type('application/json; charset=utf-8')
        .send({ errors: [{ code: 'invalid_request', message: fe.message.slice(0, 200) }] });
    }
    // The database down or full is not a bug of this request: a status clients and load
    // balancers retry (docs/operations.md "When the database fails").
    const fault = faultAnswer(err);
    if (fault) {
      req.log.warn({ err: { message: fe.message, code: (fe as { code?: unknown }).code } }, 'database fault');
      if (metrics) countDatabaseFault(metrics, fault.kind, 'http');
      return sendError(reply, fault.code, one(fault.code, fault.message), { 'Retry-After': String(fault.retryAfter) });
    }
    req.log.error({ err }, 'unhandled error');
    return sendError(reply, 'internal_error', one('internal_error', 'Internal server error; safe to retry'));
  });
}
