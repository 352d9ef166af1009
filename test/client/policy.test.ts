/** The retry policy's pure parts: which answers are transient, and how Retry-After is read. */
import { isRetryable, PostyardError, parseRetryAfter } from '@postyard/client';
import { describe, expect, it } from 'vitest';

const answer = (status: number, code: string) =>
  PostyardError.fromResponse(status, JSON.stringify({ errors: [{ code, message: 'm' }] }), {
    method: 'POST',
    path: '/v1/transmissions',
    requestId: null,
    retryAfterMs: null,
  });

describe('isRetryable', () => {
  it('retries 429 and 5xx, and 409 idempotency_in_progress', () => {
    for (const [s, c] of [
      [429, 'rate_limited'],
      [500, 'internal_error'],
      [502, 'http_502'],
      [503, 'unavailable'],
      [504, 'http_504'],
      [409, 'idempotency_in_progress'],
    ] as const) {
      expect(isRetryable(answer(s, c)), `${s} ${c}`).toBe(true);
    }
  });

  it('never retries other 4xx, nor 409 idempotency_key_reused', () => {
    for (const [s, c] of [
      [400, 'invalid_json'],
      [401, 'unauthorized'],
      [403, 'insufficient_scope'],
      [404, 'not_found'],
      [409, 'idempotency_key_reused'],
      [413, 'payload_too_large'],
      [415, 'unsupported_media_type'],
      [422, 'validation_failed'],
    ] as const) {
      expect(isRetryable(answer(s, c)), `${s} ${c}`).toBe(false);
    }
  });

  it('reads a body that is not the API error shape (a proxy page) as http_<status>', () => {
    const err = PostyardError.fromResponse(502, '<html>Bad Gateway</html>', {
      method: 'GET',
      path: '/v1/events',
      requestId: null,
      retryAfterMs: null,
    });
    expect(err).toMatchObject({ status: 502, code: 'http_502', errors: [{ message: '<html>Bad Gateway</html>' }] });
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds, fractional seconds and HTTP dates', () => {
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0);
  });

  it('ignores absent or unreadable values', () => {
    expect(parseRetryAfter(null)).toBeNull();
    expect(parseRetryAfter('')).toBeNull();
    expect(parseRetryAfter('soon')).toBeNull();
    expect(parseRetryAfter('-1')).toBeNull();
  });
});
