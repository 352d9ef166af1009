import { insertMany } from '../../db/batch.ts';
import type { Executor } from '../../db/executor.ts';
import type { DeliveryAttemptsTable, MessagesTable, TransmissionsTable } from '../../db/schema.ts';

export async function insertTransmission(db: Executor, row: TransmissionsTable): Promise<void> {
  await insertMany(db, 'transmissions', [row]);
}

export async function findTransmission(db: Executor, tenantId: string, id: string) {
  return db
    .selectFrom('transmissions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function listTransmissionMessages(db: Executor, tenantId: string, transmissionId: string) {
  return db
    .selectFrom('messages')
    .select(['id', 'recipient', 'recipient_role', 'state', 'attempt_count', 'updated_at'])
    .where('tenant_id', '=', tenantId)
    .where('transmission_id', '=', transmissionId)
    .orderBy('id')
    .execute();
}

export async function findMessage(db: Executor, tenantId: string, id: string): Promise<MessagesTable | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function listAttempts(
  db: Executor,
  tenantId: string,
  messageId: string,
): Promise<DeliveryAttemptsTable[]> {
  return db
    .selectFrom('delivery_attempts')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('message_id', '=', messageId)
    .orderBy('attempt')
    .execute();
}
