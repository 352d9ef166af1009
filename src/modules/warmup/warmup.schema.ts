import { type Static, Type } from '@sinclair/typebox';

/** Route schemas of /v1/warmup-policies (docs/api.md "Warmup policies", docs/ip-pools.md). */

export const MAX_STAGES = 120;

const Stage = Type.Object(
  {
    day: Type.Integer({ minimum: 1, maximum: 3650, description: 'Warmup day this stage starts on (1 = first)' }),
    daily_limit: Type.Integer({ minimum: 1, maximum: 100_000_000 }),
    hourly_limit: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 100_000_000 }), Type.Null()])),
  },
  { additionalProperties: false },
);
const rate = Type.Number({ minimum: 0, maximum: 1, description: 'A fraction: 0.02 = 2 %' });
const name = Type.String({ minLength: 1, maxLength: 128 });

export const CreateWarmupBody = Type.Object(
  {
    name: Type.Optional(name),
    stages: Type.Array(Stage, { minItems: 1, maxItems: MAX_STAGES }),
    max_bounce_rate: rate,
    max_complaint_rate: rate,
  },
  { additionalProperties: false },
);

export const UpdateWarmupBody = Type.Object(
  {
    name: Type.Optional(name),
    stages: Type.Optional(Type.Array(Stage, { minItems: 1, maxItems: MAX_STAGES })),
    max_bounce_rate: Type.Optional(rate),
    max_complaint_rate: Type.Optional(rate),
  },
  { additionalProperties: false },
);

export const WarmupPolicy = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    stages: Type.Array(
      Type.Object({
        day: Type.Integer(),
        daily_limit: Type.Integer(),
        hourly_limit: Type.Union([Type.Integer(), Type.Null()]),
      }),
    ),
    max_bounce_rate: Type.Number(),
    max_complaint_rate: Type.Number(),
    created_at: Type.String(),
    updated_at: Type.String(),
  },
  { $id: 'WarmupPolicy' },
);

export type CreateWarmupInput = Static<typeof CreateWarmupBody>;
export type UpdateWarmupInput = Static<typeof UpdateWarmupBody>;
export type WarmupPolicyView = Static<typeof WarmupPolicy>;
export type WarmupStage = WarmupPolicyView['stages'][number];
