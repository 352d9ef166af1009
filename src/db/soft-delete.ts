import type { Executor } from './executor.ts';

/** Tables whose rows are deleted softly: the row stays for audit, `deleted_at` ends its use. */
export const SOFT_DELETED_TABLES = ['api_keys', 'smtp_credentials'] as const;
export type SoftDeletedTable = (typeof SOFT_DELETED_TABLES)[number];

/**
 * Marks one live row of the tenant deleted at `at`. Returns false when there is no such live
 * row (unknown id, another tenant's id, or deleted already): the caller answers 404 alike.
 */
export async function softDelete(
  db: Executor,
  table: SoftDeletedTable,
  tenantId: string,
  id: string,
  at: string,
): Promise<boolean> {
  const res = await db
    .updateTable(table)
    .set({ deleted_at: at })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}
