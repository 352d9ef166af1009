import { Type } from '@sinclair/typebox';
import { PageQuery } from '../../http/schemas.ts';
import { REASON_CATEGORIES, SUPPRESSION_SCOPES, SUPPRESSION_TYPES } from './suppressions.service.ts';

/** GET /v1/suppressions filters; the dashboard's suppression list takes the same. */
export const SuppressionsQuery = Type.Object({
  ...PageQuery,
  type: Type.Optional(Type.String({ enum: [...SUPPRESSION_TYPES] })),
  reason_category: Type.Optional(Type.String({ enum: [...REASON_CATEGORIES] })),
  scope: Type.Optional(Type.String({ enum: [...SUPPRESSION_SCOPES] })),
  identifier: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 320,
      description: 'Exact match after normalization (an email when it holds "@", else a domain).',
    }),
  ),
});
