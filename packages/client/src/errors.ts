/** One entry of the API's error body: `{"errors":[{"code","message","field"?}]}`. */
export interface ApiErrorDetail {
  code: string;
  message: string;
  field?: string;
}

export interface PostyardErrorInit {
  status: number;
  errors: ApiErrorDetail[];
  requestId: string | null;
  method: string;
  path: string;
  retryAfterMs?: number | null;
  cause?: unknown;
}

/**
 * Every failure of a call: an error answer of the API (status >= 300), or, as the subclass
 * PostyardNetworkError, no answer at all (status 0). `catch (e) { if (e instanceof PostyardError) }`
 * therefore catches both.
 */
export class PostyardError extends Error {
  /** HTTP status; 0 when no answer arrived (PostyardNetworkError). */
  readonly status: number;
  /** The first error code (`validation_failed`, `rate_limited`, ..., or `network_error` / `timeout`). */
  readonly code: string;
  /** Every entry of the error body, with `field` where one field is at fault (`recipients[2].email`). */
  readonly errors: ApiErrorDetail[];
  /** X-Request-ID of the (last) answer: quote it when asking the operator to look at the logs. */
  readonly requestId: string | null;
  readonly method: string;
  readonly path: string;
  /** Retry-After of the answer, in milliseconds. */
  readonly retryAfterMs: number | null;
  /** How many attempts the call made before giving up (1 = no retry). */
  attempts = 1;

  constructor(message: string, init: PostyardErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'PostyardError';
    this.status = init.status;
    this.errors = init.errors;
    this.code = init.errors[0]?.code ?? `http_${init.status}`;
    this.requestId = init.requestId;
    this.method = init.method;
    this.path = init.path;
    this.retryAfterMs = init.retryAfterMs ?? null;
  }

  /** The messages per field (`{"recipients[0].email": ["..."]}`), for showing next to form inputs. */
  get fieldErrors(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const e of this.errors) if (e.field !== undefined) (out[e.field] ??= []).push(e.message);
    return out;
  }

  /** An error for an HTTP answer; `body` is whatever came back (JSON error body, HTML of a proxy, ...). */
  static fromResponse(
    status: number,
    body: string,
    ctx: { method: string; path: string; requestId: string | null; retryAfterMs: number | null },
  ): PostyardError {
    const errors = parseErrors(body) ?? [
      { code: `http_${status}`, message: body.trim().slice(0, 200) || `HTTP ${status}` },
    ];
    const first = errors[0];
    const rid = ctx.requestId ? ` (request ${ctx.requestId})` : '';
    const msg = `${ctx.method} ${ctx.path} answered ${status} ${first?.code ?? ''}: ${first?.message ?? ''}${rid}`;
    const ErrorClass = errorClassFor(status, first?.code);
    return new ErrorClass(msg, { status, errors, ...ctx });
  }
}

/*
 * One subclass per class of failure, so callers can branch with `instanceof` instead of comparing
 * statuses. Each is a PostyardError: existing `instanceof PostyardError` checks keep working.
 */

/** 401: the API key is missing, unknown or revoked. Retrying does not help; fix the key. */
export class PostyardAuthenticationError extends PostyardError {
  override name = 'PostyardAuthenticationError';
}

/** 403 `insufficient_scope`: the key is valid but lacks the scope the call needs. */
export class PostyardScopeError extends PostyardError {
  override name = 'PostyardScopeError';
}

/** 400, 413, 415, 422: the request is wrong (see `fieldErrors`); resending it unchanged fails again. */
export class PostyardValidationError extends PostyardError {
  override name = 'PostyardValidationError';
}

/** 404: no such resource for this tenant. */
export class PostyardNotFoundError extends PostyardError {
  override name = 'PostyardNotFoundError';
}

/** 409: the request conflicts with the state (Idempotency-Key reused or in progress, a limit reached). */
export class PostyardConflictError extends PostyardError {
  override name = 'PostyardConflictError';
}

/** 429: rate limited; `retryAfterMs` says when to come back (the client already retried). */
export class PostyardRateLimitError extends PostyardError {
  override name = 'PostyardRateLimitError';
}

/** 5xx: the server (or a proxy in front of it) failed; the client already retried. */
export class PostyardServerError extends PostyardError {
  override name = 'PostyardServerError';
}

type ErrorClass = new (message: string, init: PostyardErrorInit) => PostyardError;

function errorClassFor(status: number, code: string | undefined): ErrorClass {
  if (status === 401) return PostyardAuthenticationError;
  if (status === 403) return code === 'insufficient_scope' ? PostyardScopeError : PostyardAuthenticationError;
  if (status === 404) return PostyardNotFoundError;
  if (status === 409) return PostyardConflictError;
  if (status === 429) return PostyardRateLimitError;
  if (status >= 500) return PostyardServerError;
  if (status === 400 || status === 413 || status === 415 || status === 422) return PostyardValidationError;
  return PostyardError;
}

/** No HTTP answer: connection refused or dropped, DNS failure, or the per-request timeout. */
export class PostyardNetworkError extends PostyardError {
  constructor(
    code: 'network_error' | 'timeout',
    ctx: { method: string; path: string; cause: unknown; timeoutMs?: number },
  ) {
    const detail =
      code === 'timeout' ? `no answer within ${ctx.timeoutMs} ms` : describeCause(ctx.cause) || 'the connection failed';
    super(`${ctx.method} ${ctx.path}: ${detail}`, {
      status: 0,
      errors: [{ code, message: detail }],
      requestId: null,
      method: ctx.method,
      path: ctx.path,
      cause: ctx.cause,
    });
    this.name = 'PostyardNetworkError';
  }
}

/** A webhook request that did not verify (bad or missing signature, timestamp out of range). */
export class WebhookVerificationFailed extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WebhookVerificationFailed';
  }
}

function parseErrors(body: string): ApiErrorDetail[] | null {
  try {
    const parsed = JSON.parse(body) as { errors?: unknown };
    if (!Array.isArray(parsed.errors) || parsed.errors.length === 0) return null;
    return parsed.errors.map((e: Partial<ApiErrorDetail>) => ({
      code: String(e.code ?? 'unknown'),
      message: String(e.message ?? ''),
      ...(typeof e.field === 'string' ? { field: e.field } : {}),
    }));
  } catch {
    return null;
  }
}

/** "fetch failed" says nothing; its cause (undici) names the system error. */
function describeCause(cause: unknown): string {
  const inner = (cause as { cause?: unknown } | null)?.cause ?? cause;
  if (inner instanceof Error) {
    const code = (inner as { code?: unknown }).code;
    return typeof code === 'string' && !inner.message.includes(code) ? `${code}: ${inner.message}` : inner.message;
  }
  return String(inner ?? '');
}

/** The system error code under a fetch failure (`ECONNREFUSED`, ...), if any. */
export function causeCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 4 && e; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
