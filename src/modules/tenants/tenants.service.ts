import type { Database } from '../../db/index.ts';
import type { TenantsTable } from '../../db/schema.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { nowIso } from '../../lib/clock.ts';
import { checkMailbox, formatMailbox } from '../../lib/email.ts';
import { notFound, validationError } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import type { ApiKeysService } from '../api-keys/api-keys.service.ts';
import { SCOPES } from '../api-keys/scopes.ts';

export interface CreatedTenant {
  tenant_id: string;
  name: string;
  default_from: string | null;
  api_key: string;
}

/**
 * Tenants are created only by operators (CLI or dashboard), never by an unauthenticated
 * HTTP call. The tenant and its first all-scopes key commit together.
 */
export class TenantsService {
  private readonly cache = new BoundedCache<string, { row: TenantsTable; expires: number }>(10_000);

  constructor(
    private readonly database: Database,
    private readonly apiKeys: ApiKeysService,
  ) {}

  async create(input: { name: string; from?: string | undefined }): Promise<CreatedTenant> {
    const name = input.name.trim();
    const errors: { field: string; message: string }[] = [];
    if (name.length < 1 || name.length > 200) errors.push({ field: 'name', message: 'name must be 1-200 characters' });
    // The default sender becomes a From header: the same one-mailbox rule as content.from.
    const from = input.from === undefined ? null : checkMailbox(input.from);
    if (from && 'error' in from) errors.push({ field: 'from', message: `from ${from.error}` });
    if (errors.length) throw validationError(errors);
    const row: TenantsTable = {
      id: newId(),
      name,
      default_from: from && 'mailbox' in from ? formatMailbox(from.mailbox) : null,
      rate_limit_rps: null,
      rate_limit_burst: null,
      created_at: nowIso(),
    };
    return this.database.db.transaction().execute(async (trx) => {
      await trx.insertInto('tenants').values(row).execute();
      const key = await this.apiKeys.create(row.id, { name: 'Initial key', scopes: [...SCOPES] }, 'all', trx);
      return { tenant_id: row.id, name: row.name, default_from: row.default_from, api_key: key.key };
    });
  }

  async get(tenantId: string): Promise<TenantsTable> {
    const row = await this.database.db.selectFrom('tenants').selectAll().where('id', '=', tenantId).executeTakeFirst();
    if (!row) throw notFound('Tenant');
    return row;
  }

  /** The tenant row cached for 5 s: the hot accept path reads the default sender from it. */
  async getCached(tenantId: string): Promise<TenantsTable> {
    const now = Date.now();
    const hit = this.cache.get(tenantId);
    if (hit && hit.expires > now) return hit.row;
    const row = await this.get(tenantId);
    this.cache.set(tenantId, { row, expires: now + 5000 });
    return row;
  }
}
