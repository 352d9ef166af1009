import { insertMany } from '../../db/batch.ts';
import type { Executor } from '../../db/executor.ts';
import type { Pacer } from '../../lib/pacer.ts';
import type { EventTagsTable, EventsTable } from '../../db/schema.ts';
import { nowIso } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { EventView, NewEvent } from './events.types.ts';

/**
 * The append-only events table. Events are written in the same transaction as the change they
 * report, so the table doubles as the webhook outbox: no event without its change, and no
 * change without its event.
 */
export function toEventRow(e: NewEvent, at: string = nowIso()): EventsTable {
  return {
    tenant_id: e.tenantId,
    id: newId(),
    type: e.type,
    created_at: at,
    transmission_id: e.transmissionId,
    message_id: e.messageId,
    recipient: e.recipient,
    mail_type: e.mailType,
    tags: JSON.stringify(e.tags),
    metadata: typeof e.metadata === 'string' ? e.metadata : JSON.stringify(e.metadata),
    data: JSON.stringify(e.data),
    // Only a group message's events name a role: every other event's row and JSON stay as they were.
    ...(e.role ? { role: e.role } : {}),
  };
}

/**
 * Appends events, their webhook outbox rows and their tag index rows, all in the caller's
 * transaction: the dispatcher sees an event exactly when the change it reports is committed.
 */
export async function insertEvents(db: Executor, events: NewEvent[], pace?: Pacer): Promise<EventsTable[]> {
  const at = nowIso();
  const rows: EventsTable[] = [];
  for (const e of events) {
    rows.push(toEventRow(e, at));
    if (pace) await pace.tick();
  }
  await insertMany(db, 'events', rows, pace);
  await insertMany(
    db,
    'webhook_outbox',
    rows.map((r) => ({ event_id: r.id, tenant_id: r.tenant_id })),
    pace,
  );
  const tags: EventTagsTable[] = [];
  events.forEach((e, i) => {
    const id = rows[i]?.id;
    if (!id) return;
    for (const tag of new Set(e.tags)) tags.push({ tenant_id: e.tenantId, tag, event_id: id });
  });
  await insertMany(db, 'event_tags', tags, pace);
  return rows;
}

export function toEventView(row: EventsTable): EventView {
  return {
    id: row.id,
    type: row.type,
    created_at: row.created_at,
    tenant_id: row.tenant_id,
    transmission_id: row.transmission_id,
    message_id: row.message_id,
    recipient: row.recipient,
    mail_type: row.mail_type,
    tags: JSON.parse(row.tags) as string[],
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    data: JSON.parse(row.data) as Record<string, unknown>,
    ...(row.role ? { role: row.role } : {}),
  };
}

/**
 * The JSON of toEventView(row), built from the stored JSON texts without parsing them again:
 * the dispatcher serializes every event it delivers, so this is on the hot path.
 */
export function eventJson(row: EventsTable): string {
  const s = JSON.stringify;
  return (
    `{"id":${s(row.id)},"type":${s(row.type)},"created_at":${s(row.created_at)},"tenant_id":${s(row.tenant_id)},` +
    `"transmission_id":${s(row.transmission_id)},"message_id":${s(row.message_id)},"recipient":${s(row.recipient)},` +
    `"mail_type":${s(row.mail_type)},"tags":${row.tags},"metadata":${row.metadata},"data":${row.data}` +
    (row.role ? `,"role":${s(row.role)}}` : '}')
  );
}
