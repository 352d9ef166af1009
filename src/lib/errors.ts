/**
 * The one error type services throw. Only http/error-handler.ts maps codes to HTTP statuses,
 * so services stay free of transport concerns (the SMTP server maps the same codes to replies).
 */
export type ErrorCode =
  | 'invalid_json'
  | 'invalid_cursor'
  | 'invalid_idempotency_key'
  | 'invalid_parameter'
  | 'unauthorized'
  | 'insufficient_scope'
  | 'not_found'
  | 'method_not_allowed'
  | 'idempotency_key_reused'
  | 'idempotency_in_progress'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'validation_failed'
  | 'sender_domain_not_verified'
  | 'domain_limit_reached'
  | 'name_taken'
  | 'in_use'
  | 'rate_limited'
  | 'internal_error'
  | 'unavailable'
  | 'insufficient_storage';

export interface ErrorDetail {
  code: string;
  message: string;
  field?: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetail[];
  /** Extra response headers (e.g. Retry-After) the transport should add. */
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { field?: string; details?: ErrorDetail[]; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = opts.details ?? [{ code, message, ...(opts.field !== undefined ? { field: opts.field } : {}) }];
    this.headers = opts.headers ?? {};
  }
}

/** A 422 carrying one entry per bad field. */
export function validationError(details: { field?: string; message: string; code?: string }[]): AppError {
  const list = details.map((d) => ({
    code: d.code ?? 'validation_failed',
    message: d.message,
    ...(d.field !== undefined ? { field: d.field } : {}),
  }));
  return new AppError('validation_failed', list[0]?.message ?? 'Validation failed', { details: list });
}

export function notFound(what: string): AppError {
  return new AppError('not_found', `${what} not found`);
}

/**
 * 409 name_taken on the `name` field of a resource whose names are unique per tenant (IP pools,
 * warmup policies); `what` is the resource with its article ("an IP pool").
 */
export function nameTaken(what: string): AppError {
  return new AppError('name_taken', `${what} with this name already exists`, { field: 'name' });
}
