import type { Static } from '@sinclair/typebox';
import { insertMany } from '../../db/batch.ts';
import type { Executor } from '../../db/executor.ts';
import { isClaimable } from '../../db/message-state.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { nowIso } from '../../lib/clock.ts';
import { domainOf } from '../../lib/email.ts';
import { notFound } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import { Pacer } from '../../lib/pacer.ts';
import { insertEvents } from '../events/events.repo.ts';
import type { NewEvent } from '../events/events.types.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { insertTransmissionLinks } from '../tracking/links.ts';
import { BUILT_IN, resolveTracking } from '../tracking/settings.ts';
import {
  findMessage,
  findTransmission,
  insertTransmission,
  listAttempts,
  listTransmissionMessages,
} from './transmissions.repo.ts';
import type { AcceptedTransmission, MessageView, TransmissionView } from './transmissions.schema.ts';
import { parseStoredContent } from '../content/stored-content.ts';
import { TrackingSettingsCache } from './tracking-cache.ts';
import type { AcceptInput } from './transmissions.validate.ts';
import type { SenderPolicy } from '../domains/sender-policy.ts';

export type AcceptResult = Static<typeof AcceptedTransmission>;

export type { SenderPolicy };

/** `options.ip_pool` (id or name) -> the pool's id; throws a 422 for an unknown pool (modules/ip-pools). */
export type PoolResolver = (db: Executor, tenantId: string, ref: string) => Promise<string>;

/**
 * Accepting mail. accept() writes the transmission, one message row per recipient (queued, or
 * suppressed), and the matching events, all through the caller's transaction: the 202 is sent
 * only after that commit, so an accepted message is never lost and a failed one leaves nothing.
 */
export class TransmissionsService {
  /** The tenants' tracking defaults, kept for 5 s (see tracking-cache.ts for the staleness across nodes). */
  readonly trackingDefaults = new TrackingSettingsCache();
  /** Told when accepted mail was committed in this process: the delivery worker's nudge. */
  private readonly queuedListeners = new Set<() => void>();

  constructor(
    private readonly db: Executor,
    private readonly suppressions: SuppressionsService,
    private readonly senderPolicy: SenderPolicy,
    private readonly resolvePool?: PoolResolver,
  ) {}

  /** Calls `listener` after each accept of this process commits; returns the unsubscribe. */
  onQueued(listener: () => void): () => void {
    this.queuedListeners.add(listener);
    return () => this.queuedListeners.delete(listener);
  }

  /** The accept paths call this once their transaction committed (not inside it: a claim would not see the rows yet). */
  queued(): void {
    for (const listener of this.queuedListeners) listener();
  }

  async accept(trx: Executor, tenantId: string, input: AcceptInput): Promise<AcceptResult> {
    await this.senderPolicy(trx, tenantId, input.senderDomains);
    // Stored as the pool's id, so renaming the pool later does not move accepted mail.
    const ipPoolId = input.ipPool && this.resolvePool ? await this.resolvePool(trx, tenantId, input.ipPool) : null;
    const transmissionId = newId();
    const now = nowIso();
    const due = input.startTime && input.startTime > now ? input.startTime : now;
    // 10,000 recipients are ~300 ms of work (row building and, on SQLite, synchronous INSERTs):
    // the pacer lets other requests run between slices of it. The transaction stays one.
    const pace = new Pacer();

    const seen = new Set<string>();
    const unique = [];
    const items: AcceptResult['items'] = [];
    for (const r of input.recipients) {
      const key = r.email.toLowerCase();
      if (seen.has(key)) {
        items.push({ email: r.email, status: 'duplicate', reason: 'duplicate_recipient' });
        continue;
      }
      seen.add(key);
      unique.push(r);
      await pace.tick();
    }
    const suppressed = await this.suppressions.findSuppressed(
      trx,
      tenantId,
      unique.map((r) => r.email),
      input.mailType,
    );
    // A turn of the loop only if the lookup ran past the slice (SQLite, thousands of addresses):
    // a forced one delayed every one-recipient accept by a loop turn (SMTP ingest, session 12).
    await pace.tick();

    const messages: MessagesTable[] = [];
    const events: NewEvent[] = [];
    let accepted = 0;
    for (const r of unique) {
      const hit = suppressed.get(r.email);
      const id = newId();
      // Serialized once: the message row and its event store the same text.
      const metadata = JSON.stringify(r.metadata);
      messages.push({
        tenant_id: tenantId,
        id,
        transmission_id: transmissionId,
        recipient: r.email,
        recipient_name: r.name,
        recipient_domain: domainOf(r.email),
        substitution_data: r.substitutionData ? JSON.stringify(r.substitutionData) : null,
        metadata,
        state: hit ? 'suppressed' : 'queued',
        attempt_count: 0,
        next_attempt_at: due,
        locked_until: null,
        locked_by: null,
        last_response: null,
        created_at: now,
        updated_at: now,
        // The fair claim's order (migration 015): transactional before marketing.
        priority: input.mailType === 'marketing' ? 1 : 0,
        // Only a group message's rows carry a role (migration 023): the others' inserts stay as they were.
        ...(r.role ? { recipient_role: r.role } : {}),
      });
      const base = {
        tenantId,
        transmissionId,
        messageId: id,
        recipient: r.email,
        mailType: input.mailType,
        tags: input.tags,
        metadata,
        role: r.role,
      };
      if (hit) {
        items.push({ email: r.email, status: 'suppressed', reason: hit.reason_category });
        events.push({
          ...base,
          type: 'message.suppressed',
          data: { reason_category: hit.reason_category, suppression_id: hit.id },
        });
      } else {
        accepted++;
        events.push({ ...base, type: 'message.accepted', data: {} });
      }
      await pace.tick();
    }

    // The tenant's defaults only fill what the transmission leaves open (SMTP submissions set both).
    const given = input.options;
    const defaults =
      given.open_tracking === undefined || given.click_tracking === undefined
        ? await this.trackingDefaults.get(trx, tenantId)
        : BUILT_IN;
    const tracking = resolveTracking(defaults, input.mailType, given);
    await insertTransmission(trx, {
      tenant_id: tenantId,
      id: transmissionId,
      source: input.source,
      mail_type: input.mailType,
      tags: JSON.stringify(input.tags),
      metadata: JSON.stringify(input.metadata),
      content: JSON.stringify(input.content),
      raw_message: input.rawMessage ? input.rawMessage.toString('base64') : null,
      options: JSON.stringify({
        ...input.options,
        ...tracking,
        ...(ipPoolId ? { ip_pool_id: ipPoolId } : {}),
      }),
      total_accepted: accepted,
      total_rejected: input.recipients.length - accepted,
      start_time: input.startTime,
      created_at: now,
    });
    // Once per transmission, however many recipients: the link table its click tokens name.
    await insertTransmissionLinks(
      trx,
      {
        tenantId,
        transmissionId,
        html: input.content.html,
        clickTracking: tracking.click_tracking,
        raw: input.rawMessage !== null,
      },
      pace,
    );
    await insertMany(trx, 'messages', messages, pace);
    await insertEvents(trx, events, pace);
    return {
      transmission_id: transmissionId,
      items,
      total_accepted_recipients: accepted,
      total_rejected_recipients: input.recipients.length - accepted,
    };
  }

  async get(tenantId: string, id: string): Promise<Static<typeof TransmissionView>> {
    const t = await findTransmission(this.db, tenantId, id);
    if (!t) throw notFound('Transmission');
    const content = parseStoredContent(t.content);
    const messages = await listTransmissionMessages(this.db, tenantId, id);
    return {
      id: t.id,
      source: t.source,
      created_at: t.created_at,
      start_time: t.start_time,
      mail_type: t.mail_type,
      tags: JSON.parse(t.tags) as string[],
      metadata: JSON.parse(t.metadata) as Record<string, string>,
      content: {
        subject: content.subject,
        from: content.from,
        reply_to: content.reply_to,
        has_text: content.text !== null,
        has_html: content.html !== null,
        attachments: content.attachments.map((a) => ({
          filename: a.filename,
          content_type: a.content_type,
          size: Math.floor((a.data.length * 3) / 4) - (a.data.endsWith('==') ? 2 : a.data.endsWith('=') ? 1 : 0),
          ...(a.content_id !== undefined ? { content_id: a.content_id } : {}),
        })),
      },
      options: JSON.parse(t.options) as Record<string, unknown>,
      total_accepted_recipients: t.total_accepted,
      total_rejected_recipients: t.total_rejected,
      messages: messages.map(({ recipient_role, ...m }) => ({ ...m, role: recipient_role ?? 'to' })),
    };
  }

  async getMessage(tenantId: string, id: string): Promise<Static<typeof MessageView>> {
    const m = await findMessage(this.db, tenantId, id);
    if (!m) throw notFound('Message');
    const attempts = await listAttempts(this.db, tenantId, id);
    const pending = isClaimable(m.state);
    return {
      id: m.id,
      transmission_id: m.transmission_id,
      recipient: m.recipient,
      recipient_name: m.recipient_name,
      role: m.recipient_role ?? 'to',
      state: m.state,
      attempt_count: m.attempt_count,
      next_attempt_at: pending ? m.next_attempt_at : null,
      last_response: m.last_response,
      metadata: m.metadata ? (JSON.parse(m.metadata) as Record<string, string>) : {},
      created_at: m.created_at,
      updated_at: m.updated_at,
      attempts: attempts.map((a) => ({
        attempt: a.attempt,
        started_at: a.started_at,
        finished_at: a.finished_at,
        mx_host: a.mx_host,
        address: a.address,
        tls: a.tls === 1,
        tls_verified: a.tls_verified == null ? null : a.tls_verified === 1,
        mta_sts: (a.mta_sts ?? null) as 'enforce' | 'testing' | 'none' | null,
        outcome: a.outcome,
        smtp_code: a.smtp_code,
        enhanced_code: a.enhanced_code,
        response: a.response,
        transcript: a.transcript,
      })),
    };
  }
}
