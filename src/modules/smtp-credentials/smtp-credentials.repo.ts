import type { Executor } from '../../db/executor.ts';
import { softDelete } from '../../db/soft-delete.ts';
import type { SmtpCredentialsTable } from '../../db/schema.ts';

export async function insertSmtpCredential(db: Executor, row: SmtpCredentialsTable): Promise<void> {
  await db.insertInto('smtp_credentials').values(row).execute();
}

export async function listSmtpCredentials(
  db: Executor,
  tenantId: string,
  opts: { limit: number; afterId?: string },
): Promise<SmtpCredentialsTable[]> {
  let q = db
    .selectFrom('smtp_credentials')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('deleted_at', 'is', null);
  if (opts.afterId) q = q.where('id', '<', opts.afterId);
  return q
    .orderBy('id', 'desc')
    .limit(opts.limit + 1)
    .execute();
}

/** Soft delete: the row stays for audit, it stops authenticating. Returns false if absent. */
export function deleteSmtpCredential(db: Executor, tenantId: string, id: string, at: string): Promise<boolean> {
  return softDelete(db, 'smtp_credentials', tenantId, id, at);
}

export async function findActiveByUsername(db: Executor, username: string): Promise<SmtpCredentialsTable | undefined> {
  return db
    .selectFrom('smtp_credentials')
    .selectAll()
    .where('username', '=', username)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}
