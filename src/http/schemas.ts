import { type TSchema, Type } from '@sinclair/typebox';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from '../lib/pagination.ts';

/** Shared route schema pieces; they also drive the generated OpenAPI document. */
export const ErrorBody = Type.Object(
  {
    errors: Type.Array(
      Type.Object({
        code: Type.String(),
        message: Type.String(),
        field: Type.Optional(Type.String()),
      }),
    ),
  },
  { $id: 'ErrorBody' },
);

export const PageQuery = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_LIMIT, default: DEFAULT_PAGE_LIMIT })),
  cursor: Type.Optional(Type.String({ maxLength: 2000 })),
};

/**
 * A list query with its page size: Ajv has already filled in the default limit (useDefaults), but
 * the schema's static type still says optional, hence the fallback.
 */
export function pageQuery<Q extends { limit?: number }>(q: Q): Q & { limit: number } {
  return { ...q, limit: q.limit ?? DEFAULT_PAGE_LIMIT };
}

export const IdParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

export function pageOf<T extends TSchema>(item: T) {
  return Type.Object({ data: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });
}

const errorRef = Type.Ref('ErrorBody');

/** Standard error responses every authenticated route can give. */
export function errorResponses(...extra: number[]) {
  const codes = [400, 401, 403, 429, 500, ...extra];
  return Object.fromEntries(codes.map((c) => [c, errorRef]));
}

export const IdempotencyHeader = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ description: 'Makes the create idempotent (24 h).' })),
});
