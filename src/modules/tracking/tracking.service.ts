/**
 * What a tracking request records (docs/tracking.md): `message.opened`, `message.clicked` and
 * `message.unsubscribed` events, and the unsubscribe's suppression. Every write goes through the
 * group commit (src/db/group-commit.ts): on SQLite the requests of one event-loop turn share one
 * durable transaction, and each request is answered only after it committed.
 */
import type { GroupCommit } from '../../db/group-commit.ts';
import type { Executor } from '../../db/executor.ts';
import { nowIso } from '../../lib/clock.ts';
import { insertEvents } from '../events/events.repo.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { classify } from './machine.ts';

export interface ClientInfo {
  ip: string;
  userAgent: string;
}

interface MessageFacts {
  tenant_id: string;
  id: string;
  transmission_id: string;
  recipient: string;
  metadata: string | null;
  state: string;
  updated_at: string;
  mail_type: string;
  tags: string;
}

async function messageFacts(db: Executor, messageId: string): Promise<MessageFacts | undefined> {
  return db
    .selectFrom('messages as m')
    .innerJoin('transmissions as t', (j) =>
      j.onRef('t.id', '=', 'm.transmission_id').onRef('t.tenant_id', '=', 'm.tenant_id'),
    )
    .select([
      'm.tenant_id',
      'm.id',
      'm.transmission_id',
      'm.recipient',
      'm.metadata',
      'm.state',
      'm.updated_at',
      't.mail_type',
      't.tags',
    ])
    .where('m.id', '=', messageId)
    .executeTakeFirst();
}

/** True when this is the first row for (message, kind, link): the event's `first`. */
async function markFirst(db: Executor, m: MessageFacts, kind: string, link: number): Promise<boolean> {
  const rows = await db
    .insertInto('tracking_firsts')
    .values({ tenant_id: m.tenant_id, message_id: m.id, kind, link, created_at: nowIso() })
    .onConflict((oc) => oc.columns(['message_id', 'kind', 'link']).doNothing())
    .returning('message_id')
    .execute();
  return rows.length > 0;
}

function eventBase(m: MessageFacts) {
  return {
    tenantId: m.tenant_id,
    transmissionId: m.transmission_id,
    messageId: m.id,
    recipient: m.recipient,
    mailType: m.mail_type,
    tags: JSON.parse(m.tags) as string[],
    metadata: m.metadata ?? '{}',
  };
}

export class TrackingService {
  constructor(
    private readonly groupCommit: GroupCommit,
    private readonly suppressions: SuppressionsService,
  ) {}

  /**
   * Records an open (`link` undefined) or a click. False when the message does not exist
   * (deleted, or never did): the caller answers exactly as for a bad token.
   */
  record(kind: 'open' | 'click', messageId: string, client: ClientInfo, click?: { link: number; url: string }) {
    return this.groupCommit.run(async (trx) => {
      const m = await messageFacts(trx, messageId);
      if (!m) return false;
      const since = m.state === 'delivered' ? Date.now() - Date.parse(m.updated_at) : null;
      const { machine } = classify({ kind, ip: client.ip, userAgent: client.userAgent, sinceDeliveryMs: since });
      const first = await markFirst(trx, m, kind, click?.link ?? 0);
      const data =
        kind === 'click'
          ? { user_agent: client.userAgent, ip: client.ip, url: click?.url ?? '', first, machine }
          : { user_agent: client.userAgent, ip: client.ip, first, machine };
      await insertEvents(trx, [
        { ...eventBase(m), type: kind === 'click' ? 'message.clicked' : 'message.opened', data },
      ]);
      return true;
    });
  }

  /**
   * Suppresses the message's recipient for marketing mail (`reason_category` and `source`
   * `unsubscribe`, scope `marketing`) and emits `message.unsubscribed` once per message (Gmail
   * may POST more than once). False when the message does not exist.
   */
  unsubscribe(messageId: string, method: 'one_click' | 'page' | 'mailto', client: ClientInfo) {
    return this.groupCommit.run(async (trx) => {
      const m = await messageFacts(trx, messageId);
      if (!m) return false;
      const s = await this.suppressions.addAutomatic(trx, m.tenant_id, {
        identifier: m.recipient,
        reason_category: 'unsubscribe',
        source: 'unsubscribe',
        scope: 'marketing',
        description: `unsubscribed (${method})`,
      });
      if (await markFirst(trx, m, 'unsubscribe', 0)) {
        await insertEvents(trx, [
          {
            ...eventBase(m),
            type: 'message.unsubscribed',
            data: { method, suppression_id: s.id, user_agent: client.userAgent, ip: client.ip },
          },
        ]);
      }
      return true;
    });
  }
}
