import type { Executor } from '../../db/executor.ts';
import { softDelete } from '../../db/soft-delete.ts';
import type { ApiKeysTable } from '../../db/schema.ts';

export async function insertApiKey(db: Executor, row: ApiKeysTable): Promise<void> {
  await db.insertInto('api_keys').values(row).execute();
}

export async function findActiveKeyByHash(db: Executor, keyHash: string): Promise<ApiKeysTable | undefined> {
  return db
    .selectFrom('api_keys')
    .selectAll()
    .where('key_hash', '=', keyHash)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** A tenant's key that is not deleted. */
export async function findActiveKey(db: Executor, tenantId: string, id: string): Promise<ApiKeysTable | undefined> {
  return db
    .selectFrom('api_keys')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** Soft delete: the row stays for audit, it stops authenticating. Returns false if absent. */
export function deleteApiKey(db: Executor, tenantId: string, id: string, at: string): Promise<boolean> {
  return softDelete(db, 'api_keys', tenantId, id, at);
}

export async function touchApiKeys(db: Executor, ids: string[], at: string): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', 'in', ids).execute();
}
