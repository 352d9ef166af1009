import { AppError } from './errors.ts';
import { hmacSha256, safeEqual } from './crypto.ts';

export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 1000;

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/**
 * Opaque keyset cursors: base64url(JSON) + "." + truncated HMAC. The HMAC makes a tampered
 * cursor a clean 400 instead of a confusing page, and keeps the format private so we can change it.
 */
export class CursorCodec {
  constructor(private readonly secret: Buffer) {}

  encode(payload: Record<string, string>): string {
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.sign(body)}`;
  }

  decode(cursor: string): Record<string, string> {
    const [body, sig] = cursor.split('.');
    if (!body || !sig || !safeEqual(sig, this.sign(body))) {
      throw new AppError('invalid_cursor', 'The cursor is not valid', { field: 'cursor' });
    }
    try {
      const parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as unknown;
      if (parsed && typeof parsed === 'object') return parsed as Record<string, string>;
    } catch {
      // fall through
    }
    throw new AppError('invalid_cursor', 'The cursor is not valid', { field: 'cursor' });
  }

  private sign(body: string): string {
    return hmacSha256(this.secret, `cursor:${body}`).subarray(0, 16).toString('base64url');
  }
}

/** Builds a page from `limit + 1` fetched rows (the extra row only tells whether more exist). */
export function toPage<R extends { id: string }, T>(
  rows: R[],
  limit: number,
  codec: CursorCodec,
  map: (row: R) => T,
): Page<T> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    data: pageRows.map(map),
    next_cursor: hasMore && last ? codec.encode({ id: last.id }) : null,
  };
}
