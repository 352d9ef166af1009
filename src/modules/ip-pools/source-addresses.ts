import type { Database } from '../../db/index.ts';
import type { Executor } from '../../db/executor.ts';
import { nowIso } from '../../lib/clock.ts';
import { notFound, validationError } from '../../lib/errors.ts';
import { isUuid } from '../../lib/ids.ts';
import type { WarmupPolicyRules } from '../warmup/ledger.ts';
import { warmupStatus } from '../warmup/ledger.ts';
import { checkStages, keptRate } from '../warmup/warmup.service.ts';
import type { WarmupStage } from '../warmup/warmup.schema.ts';
import { bumpRoutingGeneration } from '../../db/routing-generation.ts';

/**
 * Source addresses belong to the operator (docs/ip-pools.md "For the operator"): each configured
 * address is shared (the default) or dedicated to one tenant, by `postyard addresses dedicate`
 * (a source_addresses row) or by `address=tenant-id` in POSTYARD_SOURCE_ADDRESSES (which wins,
 * and which the commands refuse to change). A tenant may use shared addresses and those dedicated
 * to it: in its pools (else 422) and at send time (source-picker.ts skips the others).
 *
 * Warmup of an address is its owner's: a shared address follows the operator's schedule
 * (`postyard addresses warmup`), a dedicated one its tenant's policy (attached in its pools; the
 * oldest pool's when several attach one), else the operator's schedule. Counts are per address.
 */

export type DedicatedBy = 'config' | 'command';

export interface AddressRules {
  /** Dedicated addresses: address -> tenant and who dedicated it. Absent: shared. */
  owners: Map<string, { tenantId: string; by: DedicatedBy }>;
  /** The operator's warmup schedules. */
  operatorWarmup: Map<string, WarmupPolicyRules>;
}

export interface SourceAddressConfig {
  sourceAddresses: readonly string[];
  sourceDedications: Readonly<Record<string, string>>;
}

/** A policy attachment of a pool address, as read for the warmup rule (oldest pool first). */
export interface PolicyAttachment {
  tenant_id: string;
  address: string;
  rules: WarmupPolicyRules;
}

export type WarmupInForce = { by: 'tenant' | 'operator'; rules: WarmupPolicyRules } | null;

export const operatorPolicyId = (address: string) => `operator:${address}`;

/** The rows, with the configuration's dedications over them. */
export async function readAddressRules(db: Executor, config: SourceAddressConfig): Promise<AddressRules> {
  const rows = await db.selectFrom('source_addresses').selectAll().execute();
  const rules: AddressRules = { owners: new Map(), operatorWarmup: new Map() };
  for (const r of rows) {
    if (r.tenant_id) rules.owners.set(r.address, { tenantId: r.tenant_id, by: 'command' });
    if (r.warmup_stages)
      rules.operatorWarmup.set(r.address, {
        id: operatorPolicyId(r.address),
        stages: JSON.parse(r.warmup_stages) as WarmupStage[],
        maxBounceRate: Number(r.max_bounce_rate ?? 0),
        maxComplaintRate: Number(r.max_complaint_rate ?? 0),
      });
  }
  for (const [address, tenantId] of Object.entries(config.sourceDedications))
    rules.owners.set(address, { tenantId, by: 'config' });
  return rules;
}

/** True when `tenantId` may send from `address`: it is shared, or dedicated to that tenant. */
export function mayUse(rules: AddressRules, tenantId: string, address: string): boolean {
  const owner = rules.owners.get(address);
  return !owner || owner.tenantId === tenantId;
}

/**
 * The warmup that holds for `address`: its tenant's policy when dedicated and the tenant attached
 * one (the first attachment of `attachments`, oldest pool first), else the operator's schedule.
 * A tenant's policy on an address not dedicated to it never applies (it would hold, or be used up
 * by, other tenants' mail).
 */
export function warmupInForce(
  rules: AddressRules,
  address: string,
  attachments: readonly PolicyAttachment[],
): WarmupInForce {
  const owner = rules.owners.get(address);
  if (owner) {
    const own = attachments.find((a) => a.address === address && a.tenant_id === owner.tenantId);
    if (own) return { by: 'tenant', rules: own.rules };
  }
  const operator = rules.operatorWarmup.get(address);
  return operator ? { by: 'operator', rules: operator } : null;
}

/** Every policy attachment of every pool (all tenants), oldest pool first. */
export async function policyAttachments(db: Executor): Promise<PolicyAttachment[]> {
  const rows = await db
    .selectFrom('ip_pool_addresses as a')
    .innerJoin('ip_pools as p', (j) => j.onRef('p.id', '=', 'a.pool_id').onRef('p.tenant_id', '=', 'a.tenant_id'))
    .innerJoin('warmup_policies as w', (j) =>
      j.onRef('w.id', '=', 'a.warmup_policy_id').onRef('w.tenant_id', '=', 'a.tenant_id'),
    )
    .select(['a.tenant_id', 'a.address', 'w.id', 'w.stages', 'w.max_bounce_rate', 'w.max_complaint_rate'])
    .orderBy('a.pool_id')
    .orderBy('a.position')
    .execute();
  return rows.map((r) => ({
    tenant_id: r.tenant_id,
    address: r.address,
    rules: {
      id: r.id,
      stages: JSON.parse(r.stages) as WarmupStage[],
      maxBounceRate: Number(r.max_bounce_rate),
      maxComplaintRate: Number(r.max_complaint_rate),
    },
  }));
}

export interface OperatorWarmupInput {
  stages: { day: number; daily_limit: number; hourly_limit?: number | null }[];
  max_bounce_rate: number;
  max_complaint_rate: number;
}

/** One line of `postyard addresses list`. */
export interface AddressListing {
  address: string;
  /** In this node's POSTYARD_SOURCE_ADDRESSES. */
  configured: boolean;
  status: 'shared' | 'dedicated';
  tenant_id: string | null;
  tenant_name: string | null;
  dedicated_by: DedicatedBy | null;
  /** Pools holding the address, and how many of them are other tenants' (which skip it). */
  pools: number;
  skipped_in_pools: number;
  /** Whose warmup holds: `tenant` (its policy), `operator` (the schedule), or null. */
  warmup: 'tenant' | 'operator' | null;
  /** The operator's schedule, whether or not it is the one in force. */
  operator_warmup: { stages: WarmupStage[]; max_bounce_rate: number; max_complaint_rate: number } | null;
  warmup_day: number;
  sent_today: number;
  /** Tenant policies attached to the address that do not apply (it is not dedicated to them). */
  ignored_policies: number;
}

/** The operator's commands (`postyard addresses ...`) and the ownership view the API uses. */
export class SourceAddresses {
  readonly configured: ReadonlySet<string>;

  constructor(
    private readonly database: Database,
    readonly config: SourceAddressConfig,
  ) {
    this.configured = new Set(config.sourceAddresses);
  }

  rules(db: Executor = this.database.db): Promise<AddressRules> {
    return readAddressRules(db, this.config);
  }

  async list(nowMs = Date.now()): Promise<AddressListing[]> {
    const db = this.database.db;
    const rules = await this.rules();
    const [held, attachments, tenants] = await Promise.all([
      db.selectFrom('ip_pool_addresses').select(['tenant_id', 'address']).execute(),
      policyAttachments(db),
      db.selectFrom('tenants').select(['id', 'name']).execute(),
    ]);
    const rows = await db.selectFrom('source_addresses').select('address').execute();
    const addresses = [...new Set([...this.configured, ...rows.map((r) => r.address), ...rules.owners.keys()])];
    const status = await warmupStatus(db, addresses, nowMs);
    return addresses.map((address) => {
      const owner = rules.owners.get(address);
      const inForce = warmupInForce(rules, address, attachments);
      const operator = rules.operatorWarmup.get(address);
      const pools = held.filter((h) => h.address === address);
      const s = status.find((x) => x.address === address);
      return {
        address,
        configured: this.configured.has(address),
        status: owner ? 'dedicated' : 'shared',
        tenant_id: owner?.tenantId ?? null,
        tenant_name: owner ? (tenants.find((t) => t.id === owner.tenantId)?.name ?? null) : null,
        dedicated_by: owner?.by ?? null,
        pools: pools.length,
        skipped_in_pools: owner ? pools.filter((p) => p.tenant_id !== owner.tenantId).length : 0,
        warmup: inForce?.by ?? null,
        operator_warmup: operator
          ? {
              stages: operator.stages,
              max_bounce_rate: operator.maxBounceRate,
              max_complaint_rate: operator.maxComplaintRate,
            }
          : null,
        warmup_day: s?.warmup_day ?? 1,
        sent_today: s?.sent_today ?? 0,
        ignored_policies: attachments.filter((a) => a.address === address && a.tenant_id !== owner?.tenantId).length,
      } satisfies AddressListing;
    });
  }

  /** Dedicates a configured address to an existing tenant; answers its listing line. */
  async dedicate(rawAddress: string, tenantId: string): Promise<AddressListing> {
    const address = this.checkAddress(rawAddress);
    const tenant = isUuid(tenantId)
      ? await this.database.db.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst()
      : undefined;
    if (!tenant) throw notFound('Tenant');
    await this.write(address, { tenant_id: tenantId });
    return this.line(address);
  }

  /** Makes an address shared again (every tenant may pool it); its operator schedule stays. */
  async share(rawAddress: string): Promise<AddressListing> {
    const address = this.checkAddress(rawAddress);
    await this.write(address, { tenant_id: null });
    return this.line(address);
  }

  /** Sets (or, with null, takes off) the operator's warmup schedule of an address. */
  async setWarmup(rawAddress: string, input: OperatorWarmupInput | null): Promise<AddressListing> {
    const address = this.checkAddress(rawAddress, { allowConfigDedicated: true });
    if (input === null) {
      await this.write(address, { warmup_stages: null, max_bounce_rate: null, max_complaint_rate: null });
      return this.line(address);
    }
    const problems: { field: string; message: string }[] = [];
    for (const [field, v] of [
      ['max_bounce_rate', input.max_bounce_rate],
      ['max_complaint_rate', input.max_complaint_rate],
    ] as const)
      if (!(v >= 0 && v <= 1)) problems.push({ field, message: 'must be a fraction from 0 to 1' });
    if (input.stages.length === 0) problems.push({ field: 'stages', message: 'at least one stage is needed' });
    if (problems.length) throw validationError(problems);
    await this.write(address, {
      warmup_stages: JSON.stringify(checkStages(input.stages)),
      max_bounce_rate: keptRate(input.max_bounce_rate),
      max_complaint_rate: keptRate(input.max_complaint_rate),
    });
    return this.line(address);
  }

  private async line(address: string): Promise<AddressListing> {
    const line = (await this.list()).find((l) => l.address === address);
    if (!line) throw new Error(`${address} vanished from the listing`);
    return line;
  }

  private checkAddress(raw: string, opts: { allowConfigDedicated?: boolean } = {}): string {
    const trimmed = raw.trim();
    const address = trimmed.includes(':') ? trimmed.toLowerCase() : trimmed;
    if (!this.configured.has(address))
      throw validationError([
        { field: 'address', message: `${raw} is not one of this host's source addresses (POSTYARD_SOURCE_ADDRESSES)` },
      ]);
    if (!opts.allowConfigDedicated && this.config.sourceDedications[address])
      throw validationError([
        {
          field: 'address',
          message: `${address} is dedicated in POSTYARD_SOURCE_ADDRESSES; change the configuration instead`,
        },
      ]);
    return address;
  }

  /** Upserts the address's row and bumps the routing generation, in one transaction. */
  private async write(
    address: string,
    set: Partial<{
      tenant_id: string | null;
      warmup_stages: string | null;
      max_bounce_rate: number | null;
      max_complaint_rate: number | null;
    }>,
  ): Promise<void> {
    const now = nowIso();
    await this.database.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('source_addresses')
        .values({
          address,
          tenant_id: null,
          warmup_stages: null,
          max_bounce_rate: null,
          max_complaint_rate: null,
          ...set,
          updated_at: now,
        })
        .onConflict((oc) => oc.column('address').doUpdateSet({ ...set, updated_at: now }))
        .execute();
      await bumpRoutingGeneration(trx);
    });
  }
}
