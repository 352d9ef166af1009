import { type Static, Type } from '@sinclair/typebox';

/** Route schemas of /v1/ip-pools (docs/api.md "IP pools", docs/ip-pools.md). */

export const MAX_POOL_ADDRESSES = 256;
export const MAX_WEIGHT = 1000;

const name = Type.String({ minLength: 1, maxLength: 128 });
const MailType = Type.Union([Type.Literal('transactional'), Type.Literal('marketing')]);

export const PoolAddressInput = Type.Object(
  {
    address: Type.String({ minLength: 2, maxLength: 64, description: 'One of POSTYARD_SOURCE_ADDRESSES' }),
    weight: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_WEIGHT, description: 'Relative share of new messages; default 1' }),
    ),
    warmup_policy_id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
  },
  { additionalProperties: false },
);

export const CreatePoolBody = Type.Object(
  {
    name,
    addresses: Type.Array(PoolAddressInput, { minItems: 1, maxItems: MAX_POOL_ADDRESSES }),
    overflow_pool_id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    default: Type.Optional(Type.Boolean()),
    mail_types: Type.Optional(Type.Array(MailType, { maxItems: 2, uniqueItems: true })),
  },
  { additionalProperties: false },
);

/** Fields sent replace the pool's; `addresses` replaces the whole list. */
export const UpdatePoolBody = Type.Object(
  {
    name: Type.Optional(name),
    addresses: Type.Optional(Type.Array(PoolAddressInput, { minItems: 1, maxItems: MAX_POOL_ADDRESSES })),
    overflow_pool_id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    default: Type.Optional(Type.Boolean()),
    mail_types: Type.Optional(Type.Array(MailType, { maxItems: 2, uniqueItems: true })),
  },
  { additionalProperties: false },
);

/**
 * Why an address of a pool is not used as it stands (docs/ip-pools.md "For the operator", Flags): it is no longer
 * configured, it is dedicated to another tenant (skipped at send time), or its warmup policy does
 * not apply because the address is not dedicated to this tenant.
 */
const AddressFlag = Type.Union([
  Type.Literal('not_configured'),
  Type.Literal('dedicated_to_another_tenant'),
  Type.Literal('warmup_policy_ignored'),
]);

export const IpPool = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    addresses: Type.Array(
      Type.Object({
        address: Type.String(),
        weight: Type.Integer(),
        warmup_policy_id: Type.Union([Type.String(), Type.Null()]),
        flags: Type.Array(AddressFlag),
      }),
    ),
    overflow_pool_id: Type.Union([Type.String(), Type.Null()]),
    default: Type.Boolean(),
    mail_types: Type.Array(MailType),
    created_at: Type.String(),
    updated_at: Type.String(),
  },
  { $id: 'IpPool' },
);

export type CreatePoolInput = Static<typeof CreatePoolBody>;
export type UpdatePoolInput = Static<typeof UpdatePoolBody>;
export type IpPoolView = Static<typeof IpPool>;
export type MailType = Static<typeof MailType>;
export type AddressFlag = Static<typeof AddressFlag>;
