import { causeCode, PostyardError, PostyardNetworkError } from './errors.ts';
import type { HttpMethod } from './types.ts';

export const CLIENT_VERSION = '0.1.0';

export interface PostyardOptions {
  /** A `pyk_...` API key (default: the POSTYARD_API_KEY environment variable). Keep it server-side: never ship it to a browser. */
  apiKey?: string;
  /** Where Postyard listens, e.g. `https://postyard.example.com`, a path prefix is kept (default: POSTYARD_BASE_URL). */
  baseUrl?: string;
  /** Per attempt: an attempt with no complete answer by then is aborted (and retried). Default 30 000. */
  timeoutMs?: number;
  /** Retries after the first attempt, for 429, 5xx and network errors only. Default 3. */
  maxRetries?: number;
  /** Exponential backoff with full jitter: attempt n waits random(0, min(maxMs, baseMs * 2^(n-1))). */
  backoff?: { baseMs?: number; maxMs?: number };
  /** A Retry-After longer than this is not waited for: the error is surfaced instead. Default 60 000. */
  maxRetryAfterMs?: number;
  /** Another fetch implementation (tests, proxies, instrumentation). Default: globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
  /** Called before each retry: for logs and metrics. */
  onRetry?: (info: RetryInfo) => void;
  userAgent?: string;
}

/** Options of one call. */
export interface RequestOptions {
  /**
   * For create-style POSTs: the key of this logical operation. Without it the client makes a
   * UUID once per call and sends it on every attempt, so a retry can never act twice. Give your
   * own (an order id, say) to also make repeated *calls* safe, e.g. across process restarts.
   */
  idempotencyKey?: string;
  timeoutMs?: number;
  maxRetries?: number;
  /** Cancels the call, including any wait between attempts; a cancelled call is never retried. */
  signal?: AbortSignal;
  /** Sent as X-Request-ID (1-128 chars of [A-Za-z0-9._-]); the server logs it with the request. */
  requestId?: string;
}

export interface RetryInfo {
  method: string;
  path: string;
  /** The attempt that failed (1-based). */
  attempt: number;
  delayMs: number;
  error: PostyardError;
}

/**
 * How safe it is to send a call again:
 * - `repeatable`: repeating has no further effect (GET, PUT, PATCH, DELETE, DNS re-check, CSV upsert,
 *   and every POST carrying an Idempotency-Key, which the server deduplicates).
 * - `unsent-only`: repeating would act twice (rotate-secret), so only failures that prove the
 *   request never reached a handler are retried: 429 (the limiter answers before any handler)
 *   and a refused connection.
 */
export type RetryMode = 'repeatable' | 'unsent-only';

export interface Call {
  method: HttpMethod;
  /** Path with parameters filled in, starting with /v1/. */
  path: string;
  query?: Record<string, unknown> | undefined;
  json?: unknown;
  form?: FormData;
  retry: RetryMode;
  /** Sends an Idempotency-Key (the caller's, or one made for this call). */
  idempotent?: boolean;
}

type Outcome =
  | { ok: true; value: unknown }
  | { ok: false; error: PostyardError; retryable: boolean; reachedServer: boolean };

/** Errors of the connect phase: the request was certainly not sent. */
const UNSENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH']);

export class HttpClient {
  private readonly apiKey: string;
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly fetchFn: typeof globalThis.fetch;
  private readonly onRetry: ((info: RetryInfo) => void) | undefined;
  private readonly userAgent: string;

  constructor(opts: PostyardOptions = {}) {
    // Read where there is a process (Node, Bun, Deno's node compat); elsewhere only the options count.
    const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
    const apiKey = opts.apiKey ?? env.POSTYARD_API_KEY;
    const baseUrl = opts.baseUrl ?? env.POSTYARD_BASE_URL;
    if (!apiKey) throw new TypeError('Postyard: apiKey is required (or set POSTYARD_API_KEY)');
    if (!baseUrl || !/^https?:\/\//i.test(baseUrl)) {
      throw new TypeError(
        'Postyard: baseUrl (or POSTYARD_BASE_URL) must be an http(s) URL, e.g. https://postyard.example.com',
      );
    }
    this.apiKey = apiKey;
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.maxRetries = opts.maxRetries ?? 3;
    this.baseMs = opts.backoff?.baseMs ?? 500;
    this.maxMs = opts.backoff?.maxMs ?? 8_000;
    this.maxRetryAfterMs = opts.maxRetryAfterMs ?? 60_000;
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.onRetry = opts.onRetry;
    const runtime = (globalThis as { process?: { version?: string } }).process?.version;
    this.userAgent = opts.userAgent ?? `postyard-client/${CLIENT_VERSION}${runtime ? ` node/${runtime}` : ''}`;
  }

  /** One logical call: up to 1 + maxRetries attempts; resolves with the parsed 2xx body. */
  async request<T>(call: Call, opts: RequestOptions = {}): Promise<T> {
    const maxRetries = opts.maxRetries ?? this.maxRetries;
    // Made once, before the first attempt: every retry carries the same key (seed section 3.4).
    const key = call.idempotent ? (opts.idempotencyKey ?? globalThis.crypto.randomUUID()) : undefined;
    let earlierReachedServer = false;
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.attempt(call, opts, key);
      if (outcome.ok) return outcome.value as T;
      const { error } = outcome;
      error.attempts = attempt;
      // A DELETE whose earlier attempt may have done the work: "gone" is what the caller wanted.
      if (call.method === 'DELETE' && error.status === 404 && earlierReachedServer) return undefined as T;
      earlierReachedServer ||= outcome.reachedServer;
      const retryable = outcome.retryable && (call.retry === 'repeatable' || !outcome.reachedServer);
      if (!retryable || attempt > maxRetries) throw error;
      const delayMs = this.delayFor(attempt, error);
      if (delayMs === null) throw error;
      this.onRetry?.({ method: call.method, path: call.path, attempt, delayMs, error });
      await sleep(delayMs, opts.signal);
    }
  }

  /** Retry-After when the server gave one (plus a little jitter), else full-jitter backoff. */
  private delayFor(attempt: number, error: PostyardError): number | null {
    if (error.retryAfterMs !== null) {
      if (error.retryAfterMs > this.maxRetryAfterMs) return null;
      // Up to 10 % (at most 1 s) more, so clients told the same Retry-After do not return in lockstep.
      return error.retryAfterMs + Math.random() * Math.min(1000, error.retryAfterMs * 0.1);
    }
    const cap = Math.min(this.maxMs, this.baseMs * 2 ** (attempt - 1));
    return Math.random() * cap;
  }

  private async attempt(call: Call, opts: RequestOptions, key: string | undefined): Promise<Outcome> {
    const url = this.url(call);
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.apiKey}`,
      accept: 'application/json',
      'user-agent': this.userAgent,
    };
    if (key !== undefined) headers['idempotency-key'] = key;
    if (opts.requestId !== undefined) headers['x-request-id'] = opts.requestId;
    let body: string | FormData | undefined;
    if (call.form) body = call.form;
    else if (call.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(call.json);
    }
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    const ctx = { method: call.method, path: call.path };

    let res: Response;
    let text: string;
    try {
      // Redirects are not followed: a POST turned into a GET elsewhere would silently lose the mail.
      res = await this.fetchFn(url, { method: call.method, headers, body: body ?? null, signal, redirect: 'manual' });
      text = await res.text(); // inside the timeout too: a stalled body is as bad as no answer
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err; // the caller cancelled: not a failure to retry
      const timedOut = timeout.aborted;
      const error = new PostyardNetworkError(timedOut ? 'timeout' : 'network_error', { ...ctx, cause: err, timeoutMs });
      return { ok: false, error, retryable: true, reachedServer: timedOut || !UNSENT_CODES.has(causeCode(err) ?? '') };
    }

    const requestId = res.headers.get('x-request-id');
    if (res.status >= 200 && res.status < 300) {
      if (res.status === 204 || text === '') return { ok: true, value: undefined };
      try {
        return { ok: true, value: JSON.parse(text) };
      } catch (cause) {
        const error = new PostyardError(`${call.method} ${call.path}: the answer is not JSON`, {
          status: res.status,
          errors: [{ code: 'invalid_response', message: 'The answer is not JSON' }],
          requestId,
          ...ctx,
          cause,
        });
        return { ok: false, error, retryable: false, reachedServer: true };
      }
    }
    const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'));
    const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
    const shown = location ? `redirected to ${location}: set baseUrl to the final address` : text;
    const error = PostyardError.fromResponse(res.status, shown, { ...ctx, requestId, retryAfterMs });
    return { ok: false, error, retryable: isRetryable(error), reachedServer: res.status !== 429 };
  }

  private url(call: Call): string {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(call.query ?? {})) {
      if (v === undefined || v === null) continue;
      qs.set(k, Array.isArray(v) ? v.join(',') : String(v));
    }
    const q = qs.toString();
    return `${this.baseUrl}${call.path}${q ? `?${q}` : ''}`;
  }
}

/**
 * 429 and 5xx are transient (seed section 7). 409 `idempotency_in_progress` is too: it means an
 * earlier attempt of this very call (same key, same body) is still running on the server, which
 * asks to come back after Retry-After; giving up would leave the caller unsure whether the mail
 * went out. 409 `idempotency_key_reused` (the key was used with another body) and every other
 * 4xx are final.
 */
export function isRetryable(error: PostyardError): boolean {
  if (error.status === 429 || error.status >= 500) return true;
  return error.status === 409 && error.code === 'idempotency_in_progress';
}

/** Retry-After as seconds (`"2"`, `"1.5"`) or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  if (!/^[A-Za-z]{3},/.test(v)) return null; // an HTTP date starts with the day name; "-1" is no date
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
