import type { Executor } from '../../db/executor.ts';
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

export async function deleteSmtpCredential(db: Executor, tenantId: string, id: string, at: string): Promise<boolean> {
  const res = await db
    .updateTable('smtp_credentials')
    .set({ deleted_at: at })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

export async function findActiveByUsername(db: Executor, username: string): Promise<SmtpCredentialsTable | undefined> {
  return db
    .selectFrom('smtp_credentials')
    .selectAll()
    .where('username', '=', username)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}
