/**
 * Which error codes (the `errors[].code` of ErrorBody, docs/api.md "Errors") an operation can
 * answer, per HTTP status, and an example body for each. The status of each code comes from the
 * error handler's own table, so the document and the answers cannot disagree.
 */
import type { ErrorCode } from '../../lib/errors.ts';
import { STATUS_BY_CODE } from '../error-handler.ts';

export interface OperationTraits {
  /** Honours Idempotency-Key (a header parameter of that name). */
  keyed: boolean;
  /** A list with a cursor parameter. */
  paged: boolean;
  /** Route-specific codes beyond the common ones (e.g. name_taken, in_use). */
  extra: readonly ErrorCode[];
}

const MESSAGES: Record<ErrorCode, string> = {
  invalid_json: 'Body is not valid JSON',
  invalid_cursor: 'cursor is not a cursor this server issued',
  invalid_idempotency_key: 'Idempotency-Key must be 1-255 printable ASCII characters',
  invalid_parameter: 'limit must be <= 1000',
  unauthorized: 'A valid API key is required: Authorization: Bearer <API_KEY>',
  insufficient_scope: 'This API key lacks the required scope',
  not_found: 'Not found',
  method_not_allowed: 'This method is not allowed here',
  idempotency_key_reused: 'This Idempotency-Key was used with a different request',
  idempotency_in_progress: 'A request with this Idempotency-Key is still in progress; retry',
  domain_limit_reached: 'This tenant has reached its sending domain limit',
  name_taken: 'This name is already taken',
  in_use: 'Still in use',
  payload_too_large: 'Body exceeds the size limit',
  unsupported_media_type: 'Content-Type must be application/json',
  validation_failed: 'must be a valid email address',
  sender_domain_not_verified: 'The sender domain is not a verified sending domain of this tenant',
  rate_limited: 'Rate limit exceeded; retry after the Retry-After delay',
  internal_error: 'Internal error; retry later (the X-Request-ID identifies it in the logs)',
  unavailable: 'The database is unreachable; retry',
  insufficient_storage: 'The server is out of storage; retry later',
};

const REASONS: Record<number, string> = {
  400: 'Bad request',
  401: 'No valid API key',
  403: 'The API key lacks the scope this operation needs',
  404: "No such resource in this tenant (another tenant's ids are 404 too)",
  409: 'Conflict',
  413: 'Body too large',
  415: 'Content-Type not accepted',
  422: 'The request is well-formed but not acceptable',
  429: 'Rate limited',
  500: 'Internal error',
  503: 'Unavailable (shutting down or the database is unreachable)',
  507: 'Insufficient storage (the database is full)',
};

/** The codes `status` can carry for an operation with these traits. */
export function codesFor(status: number, t: OperationTraits): ErrorCode[] {
  const all = (Object.keys(STATUS_BY_CODE) as ErrorCode[]).filter(
    (c) => STATUS_BY_CODE[c] === status && c !== 'method_not_allowed',
  );
  const fit = all.filter((c) => {
    if (c === 'invalid_cursor') return t.paged;
    if (c === 'invalid_idempotency_key' || c === 'idempotency_key_reused' || c === 'idempotency_in_progress')
      return t.keyed;
    if (c === 'invalid_json') return true;
    if (['domain_limit_reached', 'name_taken', 'in_use', 'sender_domain_not_verified'].includes(c))
      return t.extra.includes(c);
    return true;
  });
  // A status the route documents but declared no code for (e.g. a 409 of a module that named
  // none): every code of that status, rather than none.
  return fit.length > 0 ? fit : all;
}

/** The description and examples of an error response. */
export function errorResponseDoc(status: number, t: OperationTraits) {
  const codes = codesFor(status, t);
  const list = codes.map((c) => `\`${c}\``).join(', ');
  return {
    description: `${REASONS[status] ?? 'Error'}. Error codes: ${list || '(none)'}.`,
    codes,
    examples: Object.fromEntries(
      codes.map((code) => [
        code,
        {
          summary: code,
          value: {
            errors: [
              {
                code,
                message: MESSAGES[code],
                ...(code === 'validation_failed' ? { field: 'recipients[0].email' } : {}),
              },
            ],
          },
        },
      ]),
    ),
  };
}
