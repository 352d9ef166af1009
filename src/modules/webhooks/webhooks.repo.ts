import type { Updateable } from 'kysely';
import { runSql } from '../../db/dialect.ts';
import type { Executor } from '../../db/executor.ts';
import type { WebhooksTable } from '../../db/schema.ts';
import { SQL } from './queue.sql.ts';

/** Webhook rows and the delivery log. Every tenant-facing query is scoped by tenant_id first. */

export async function insertWebhook(db: Executor, row: WebhooksTable): Promise<void> {
  await db.insertInto('webhooks').values(row).execute();
}

export async function findWebhook(db: Executor, tenantId: string, id: string): Promise<WebhooksTable | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function updateWebhook(
  db: Executor,
  tenantId: string,
  id: string,
  set: Updateable<WebhooksTable>,
): Promise<boolean> {
  const res = await db
    .updateTable('webhooks')
    .set(set)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

/** Deletes the webhook with its pending queue and its delivery log. */
export async function deleteWebhook(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const res = await db.deleteFrom('webhooks').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  if (Number(res.numDeletedRows) === 0) return false;
  await runSql(db, SQL.dropQueue, [id]);
  await db.deleteFrom('webhook_deliveries').where('tenant_id', '=', tenantId).where('webhook_id', '=', id).execute();
  return true;
}

/**
 * Drops what a webhook still had queued: a disabled webhook receives nothing (docs/webhooks.md
 * "Retries and disabling").
 */
export async function dropQueue(db: Executor, webhookId: string): Promise<void> {
  await runSql(db, SQL.dropQueue, [webhookId]);
}

/**
 * Disables an enabled webhook (410 or 5 days of failures) and drops its queue. Returns false
 * when it was already disabled, so concurrent nodes report it once.
 */
export async function disableWebhook(db: Executor, id: string, reason: string, at: string): Promise<boolean> {
  const res = await db
    .updateTable('webhooks')
    .set({ enabled: 0, status: 'disabled', disabled_reason: reason, updated_at: at })
    .where('id', '=', id)
    .where('enabled', '=', 1)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) return false;
  await dropQueue(db, id);
  return true;
}

/** Every enabled webhook of every tenant: the dispatcher's routing table. */
export async function enabledWebhooks(db: Executor): Promise<WebhooksTable[]> {
  return db.selectFrom('webhooks').selectAll().where('enabled', '=', 1).execute();
}
