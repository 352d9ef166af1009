import type { Executor } from '../../db/executor.ts';
import { softDelete } from '../../db/soft-delete.ts';
import type { SmtpCredentialsTable } from '../../db/schema.ts';

export async function insertSmtpCredential(db: Executor, row: SmtpCredentialsTable): Promise<void> {
  await db.insertInto('smtp_credentials').values(row).execute();
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
