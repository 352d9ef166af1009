import { isIP } from 'node:net';
import type { Database } from '../../db/index.ts';
import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { IpPoolAddressesTable, IpPoolsTable } from '../../db/schema.ts';
import { writeNamed } from '../../db/unique-violation.ts';
import { nowIso } from '../../lib/clock.ts';
import { AppError, nameTaken, notFound, validationError } from '../../lib/errors.ts';
import { isUuid, newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { findPolicy } from '../warmup/warmup.service.ts';
import { findPool, findPoolByName, poolAddresses, replaceAddresses, tenantPools } from './ip-pools.repo.ts';
import type { AddressFlag, CreatePoolInput, IpPoolView, MailType, UpdatePoolInput } from './ip-pools.schema.ts';
import { bumpRoutingGeneration } from '../../db/routing-generation.ts';
import { type AddressRules, mayUse, type SourceAddresses } from './source-addresses.ts';

type Problem = { field: string; message: string };

/** The resource as name_taken names it. */
const POOL = 'an IP pool';

/** The canonical text of an address (IPv6 lower case), as configured addresses are compared. */
export const canonicalAddress = (a: string) => (isIP(a) === 6 ? a.toLowerCase() : a);

/** What a tenant's pool holds and may not use as it is (docs/ip-pools.md "For the operator", Flags). */
interface FlagContext {
  tenantId: string;
  configured: ReadonlySet<string>;
  rules: AddressRules;
}

function flagsOf(a: IpPoolAddressesTable, ctx: FlagContext): AddressFlag[] {
  const flags: AddressFlag[] = [];
  if (!ctx.configured.has(a.address)) flags.push('not_configured');
  const usable = mayUse(ctx.rules, ctx.tenantId, a.address);
  if (!usable) flags.push('dedicated_to_another_tenant');
  // A policy applies only on an address dedicated to the tenant (warmup of a shared one is the operator's).
  if (a.warmup_policy_id && ctx.rules.owners.get(a.address)?.tenantId !== ctx.tenantId)
    flags.push('warmup_policy_ignored');
  return flags;
}

function view(row: IpPoolsTable, addresses: IpPoolAddressesTable[], ctx: FlagContext): IpPoolView {
  return {
    id: row.id,
    name: row.name,
    addresses: addresses.map((a) => ({
      address: a.address,
      weight: a.weight,
      warmup_policy_id: a.warmup_policy_id,
      flags: flagsOf(a, ctx),
    })),
    overflow_pool_id: row.overflow_pool_id,
    default: row.is_default === 1,
    mail_types: JSON.parse(row.mail_types) as MailType[],
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * IP pools (docs/ip-pools.md, scope manage:ip-pools): named sets of this host's source addresses
 * with weights, an optional overflow pool, the tenant's default and the mail types it serves.
 * One default per tenant and each mail type in at most one pool: setting either on a pool takes
 * it off the tenant's other pools in the same transaction.
 */
export class IpPoolsService {
  private readonly configured: ReadonlySet<string>;

  constructor(
    private readonly database: Database,
    private readonly cursors: CursorCodec,
    private readonly sources: SourceAddresses,
  ) {
    this.configured = new Set([...sources.configured].map(canonicalAddress));
  }

  private async flagContext(db: Executor, tenantId: string): Promise<FlagContext> {
    return { tenantId, configured: this.configured, rules: await this.sources.rules(db) };
  }

  private get db() {
    return this.database.db;
  }

  private async checkAddresses(
    db: Executor,
    tenantId: string,
    list: CreatePoolInput['addresses'],
    problems: Problem[],
  ) {
    const seen = new Set<string>();
    const rules = await this.sources.rules(db);
    const rows: Omit<IpPoolAddressesTable, 'tenant_id' | 'pool_id' | 'position'>[] = [];
    for (const [i, a] of list.entries()) {
      const field = `addresses[${i}].address`;
      const address = canonicalAddress(a.address.trim());
      const owner = rules.owners.get(address);
      if (!this.configured.has(address))
        problems.push({
          field,
          message: `${a.address} is not one of this host's source addresses (POSTYARD_SOURCE_ADDRESSES)`,
        });
      else if (owner && owner.tenantId !== tenantId)
        problems.push({ field, message: `${a.address} is dedicated to another tenant` });
      else if (seen.has(address)) problems.push({ field, message: `${a.address} is listed twice` });
      seen.add(address);
      const policy = a.warmup_policy_id ?? null;
      const policyField = `addresses[${i}].warmup_policy_id`;
      if (policy !== null && !(await findPolicy(db, tenantId, policy)))
        problems.push({ field: policyField, message: 'no such warmup policy' });
      else if (policy !== null && owner?.tenantId !== tenantId)
        problems.push({
          field: policyField,
          message: `${a.address} is shared: a warmup policy may be attached only to an address dedicated to this tenant (warmup of a shared address is the operator's)`,
        });
      rows.push({ address, weight: a.weight ?? 1, warmup_policy_id: policy });
    }
    return rows;
  }

  /** The overflow target must be another pool of the tenant, and following overflows must not come back. */
  private async checkOverflow(db: Executor, tenantId: string, selfId: string, target: string, problems: Problem[]) {
    const field = 'overflow_pool_id';
    if (target === selfId) return void problems.push({ field, message: 'a pool cannot overflow into itself' });
    const pools = new Map((await tenantPools(db, tenantId)).map((p) => [p.id, p]));
    if (!pools.has(target)) return void problems.push({ field, message: 'no such IP pool' });
    const seen = new Set<string>([selfId]);
    for (let at: string | null = target; at; at = pools.get(at)?.overflow_pool_id ?? null) {
      if (seen.has(at)) return void problems.push({ field, message: 'overflow pools would form a cycle' });
      seen.add(at);
    }
  }

  /** Takes `default` and the given mail types off the tenant's other pools. */
  private async claimRoles(db: Executor, tenantId: string, selfId: string, isDefault: boolean, types: MailType[]) {
    if (isDefault)
      await db
        .updateTable('ip_pools')
        .set({ is_default: 0 })
        .where('tenant_id', '=', tenantId)
        .where('id', '!=', selfId)
        .where('is_default', '=', 1)
        .execute();
    if (types.length === 0) return;
    for (const p of await tenantPools(db, tenantId)) {
      if (p.id === selfId) continue;
      const had = JSON.parse(p.mail_types) as MailType[];
      const kept = had.filter((t) => !types.includes(t));
      if (kept.length !== had.length)
        await db
          .updateTable('ip_pools')
          .set({ mail_types: JSON.stringify(kept) })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', p.id)
          .execute();
    }
  }

  async create(db: Executor, tenantId: string, input: CreatePoolInput): Promise<IpPoolView> {
    const problems: Problem[] = [];
    const id = newId();
    const addresses = await this.checkAddresses(db, tenantId, input.addresses, problems);
    const overflow = input.overflow_pool_id ?? null;
    if (overflow !== null) await this.checkOverflow(db, tenantId, id, overflow, problems);
    if (problems.length) throw validationError(problems);
    const name = input.name.trim();
    if (await findPoolByName(db, tenantId, name)) throw nameTaken(POOL);
    const now = nowIso();
    const types = input.mail_types ?? [];
    const row: IpPoolsTable = {
      tenant_id: tenantId,
      id,
      name,
      overflow_pool_id: overflow,
      is_default: input.default ? 1 : 0,
      mail_types: JSON.stringify(types),
      created_at: now,
      updated_at: now,
    };
    await this.claimRoles(db, tenantId, id, row.is_default === 1, types);
    await writeNamed(POOL, () => db.insertInto('ip_pools').values(row).execute());
    await replaceAddresses(db, tenantId, id, addresses);
    await bumpRoutingGeneration(db);
    return view(row, await poolAddresses(db, tenantId, [id]), await this.flagContext(db, tenantId));
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<IpPoolView>> {
    const page = await newestFirstPage(
      this.db,
      'ip_pools',
      tenantId,
      { limit, cursor, cursors: this.cursors },
      (r) => r,
    );
    const addresses = await poolAddresses(
      this.db,
      tenantId,
      page.data.map((p) => p.id),
    );
    const ctx = await this.flagContext(this.db, tenantId);
    return {
      data: page.data.map((p) =>
        view(
          p,
          addresses.filter((a) => a.pool_id === p.id),
          ctx,
        ),
      ),
      next_cursor: page.next_cursor,
    };
  }

  async get(tenantId: string, id: string): Promise<IpPoolView> {
    const row = await findPool(this.db, tenantId, id);
    if (!row) throw notFound('IP pool');
    return view(row, await poolAddresses(this.db, tenantId, [id]), await this.flagContext(this.db, tenantId));
  }

  async update(tenantId: string, id: string, input: UpdatePoolInput): Promise<IpPoolView> {
    return this.db.transaction().execute(async (trx) => {
      const row = await findPool(trx, tenantId, id);
      if (!row) throw notFound('IP pool');
      const problems: Problem[] = [];
      const addresses = input.addresses ? await this.checkAddresses(trx, tenantId, input.addresses, problems) : null;
      const overflow = input.overflow_pool_id === undefined ? row.overflow_pool_id : input.overflow_pool_id;
      if (overflow !== null && input.overflow_pool_id !== undefined)
        await this.checkOverflow(trx, tenantId, id, overflow, problems);
      if (problems.length) throw validationError(problems);
      const name = input.name?.trim() ?? row.name;
      if (name !== row.name && (await findPoolByName(trx, tenantId, name))) throw nameTaken(POOL);
      const types = input.mail_types ?? (JSON.parse(row.mail_types) as MailType[]);
      const next: IpPoolsTable = {
        ...row,
        name,
        overflow_pool_id: overflow,
        is_default: input.default === undefined ? row.is_default : input.default ? 1 : 0,
        mail_types: JSON.stringify(types),
        updated_at: nowIso(),
      };
      await this.claimRoles(trx, tenantId, id, next.is_default === 1 && row.is_default !== 1, input.mail_types ?? []);
      await writeNamed(POOL, () =>
        trx
          .updateTable('ip_pools')
          .set({
            name: next.name,
            overflow_pool_id: next.overflow_pool_id,
            is_default: next.is_default,
            mail_types: next.mail_types,
            updated_at: next.updated_at,
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .execute(),
      );
      if (addresses) await replaceAddresses(trx, tenantId, id, addresses);
      await bumpRoutingGeneration(trx);
      return view(next, await poolAddresses(trx, tenantId, [id]), await this.flagContext(trx, tenantId));
    });
  }

  /** A pool another pool overflows into is 409 in_use. Accepted mail that named it falls back (docs). */
  async delete(tenantId: string, id: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const row = await findPool(trx, tenantId, id);
      if (!row) throw notFound('IP pool');
      const referer = await trx
        .selectFrom('ip_pools')
        .select('name')
        .where('tenant_id', '=', tenantId)
        .where('overflow_pool_id', '=', id)
        .executeTakeFirst();
      if (referer) throw new AppError('in_use', `pool "${referer.name}" overflows into this pool; change it first`);
      await trx.deleteFrom('ip_pool_addresses').where('tenant_id', '=', tenantId).where('pool_id', '=', id).execute();
      await trx.deleteFrom('ip_pools').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
      await bumpRoutingGeneration(trx);
    });
  }

  /**
   * `options.ip_pool` of a transmission (the pool's id or name) -> the pool id, in the accept
   * transaction; an unknown pool is 422 naming the field.
   */
  async resolve(db: Executor, tenantId: string, ref: string, field = 'options.ip_pool'): Promise<string> {
    const byId = isUuid(ref) ? await findPool(db, tenantId, ref) : undefined;
    const row = byId ?? (await findPoolByName(db, tenantId, ref));
    if (!row) throw validationError([{ field, message: `no IP pool with the id or name "${ref}"` }]);
    return row.id;
  }
}
