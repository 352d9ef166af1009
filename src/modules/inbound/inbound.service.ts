import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import type { GroupCommit } from '../../db/group-commit.ts';
import type { Database } from '../../db/index.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { nowIso } from '../../lib/clock.ts';
import { classifyBounce } from '../delivery/bounce-rules.ts';
import { type AttemptRecord, eventFor, type Outcome, suppressIfProven } from '../delivery/outcomes.ts';
import { insertEvents } from '../events/events.repo.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import type { TrackingService } from '../tracking/tracking.service.ts';
import { type InboundReport, parseInbound, type RecipientStatus } from './report-parser.ts';
import type { VerpSigner } from './verp.ts';

/**
 * What an inbound report does to our messages (docs/inbound.md):
 * - DSN `failed` for a `delivered` message: the message becomes `bounced`, `message.bounced`
 *   with `data.async: true` and the delivery engine's classification, and the same automatic
 *   suppression a synchronous bounce gives (outcomes.ts eventFor / suppressIfProven);
 * - DSN `delayed`: `message.deferred` with `data.async: true`, the state stays `delivered`;
 * - ARF: `message.complained` (once per message) and a `complaint` suppression;
 * - auto-replies are counted and dropped; whatever matches none of our messages is counted and
 *   logged without its body.
 * Which message a report is about comes from where it was sent (a signed VERP token), or, for
 * `fbl@` reports, from a signed token or our Message-ID inside it, within the tenants that own
 * that return-path domain: a report can never reach another tenant's message.
 */
export type InboundResult = 'bounce' | 'delayed' | 'complaint' | 'auto_reply' | 'unmatched' | 'refused' | 'unsubscribe';

/** Who a message was sent to here, as decided at RCPT TO. */
export type InboundTarget =
  | { kind: 'verp'; messageId: string }
  /** `fbl@<domain>`: `tenants` own that return-path domain; null = the shared bounce host. */
  | { kind: 'fbl'; domain: string; tenants: string[] | null }
  /** `unsubscribe+<tracking token>@...`: the List-Unsubscribe mailto of a marketing message. */
  | { kind: 'unsubscribe'; messageId: string };

interface Found {
  msg: MessagesTable;
  mailType: string;
  tags: string[];
}

export function inboundCounter(registry: Registry): Counter<'result'> {
  const name = 'postyard_inbound_messages_total';
  const existing = registry.getSingleMetric(name) as Counter<'result'> | undefined;
  return (
    existing ??
    new Counter({
      name,
      help: 'Inbound messages (DSNs, complaints, auto-replies) by result',
      labelNames: ['result'] as const,
      registers: [registry],
    })
  );
}

export class InboundService {
  readonly counter: Counter<'result'>;

  constructor(
    private readonly database: Database,
    /** Writes go through the group commit (SQLite: concurrent reports share one transaction). */
    private readonly groupCommit: GroupCommit,
    private readonly suppressions: SuppressionsService,
    private readonly verp: VerpSigner,
    registry: Registry,
    private readonly logger: Logger,
    private readonly tracking: TrackingService,
  ) {
    this.counter = inboundCounter(registry);
  }

  count(result: InboundResult): void {
    this.counter.inc({ result });
  }

  /** Handles one received message for each of its accepted recipients; returns the results. */
  async receive(raw: Buffer, targets: InboundTarget[], envelope: { from: string; remote: string }) {
    let report: InboundReport = { kind: 'other', refs: { tokens: [], messageIds: [] } };
    if (targets.some((t) => t.kind !== 'unsubscribe'))
      try {
        report = await parseInbound(raw);
      } catch (err) {
        // Broken MIME is the sender's problem, not a reason to make it retry: nothing matched.
        this.logger.info({ err: (err as Error).message }, 'inbound message could not be parsed');
      }
    const results: InboundResult[] = [];
    for (const target of targets) {
      if (target.kind === 'unsubscribe') {
        // Any message to that address is the request (RFC 2369); what it says does not matter.
        const ok = await this.tracking.unsubscribe(target.messageId, 'mailto', { ip: envelope.remote, userAgent: '' });
        const result: InboundResult = ok ? 'unsubscribe' : 'unmatched';
        this.count(result);
        results.push(result);
        continue;
      }
      const result = await this.apply(report, target);
      this.count(result);
      if (result === 'unmatched') {
        // Never the body: it is someone else's mail.
        this.logger.info(
          {
            target: target.kind,
            kind: report.kind,
            mailFrom: envelope.from,
            remote: envelope.remote,
            bytes: raw.length,
          },
          'inbound message matched no message',
        );
      }
      results.push(result);
    }
    return results;
  }

  private async apply(report: InboundReport, target: InboundTarget): Promise<InboundResult> {
    if (report.kind === 'auto_reply') return 'auto_reply';
    if (report.kind === 'other') return 'unmatched';
    const found = await this.findMessage(report, target);
    if (!found) return 'unmatched';
    if (report.kind === 'complaint') return this.complaint(found, report.feedbackType, report.userAgent);
    const status = pickStatus(report.recipients, found.msg.recipient);
    if (!status) return 'unmatched';
    return status.action === 'failed' ? this.bounce(found, status) : this.delayed(found, status);
  }

  private async findMessage(report: InboundReport, target: InboundTarget): Promise<Found | null> {
    if (target.kind === 'verp') return this.load(target.messageId, null);
    if (target.kind !== 'fbl') return null;
    for (const token of report.refs.tokens) {
      const id = this.verp.verify(token);
      if (id) return this.load(id, target.tenants);
    }
    for (const id of report.refs.messageIds) {
      const found = await this.load(id, target.tenants);
      if (found) return found;
    }
    return null;
  }

  private async load(messageId: string, tenants: string[] | null): Promise<Found | null> {
    if (tenants !== null && tenants.length === 0) return null;
    let q = this.database.db
      .selectFrom('messages as m')
      .innerJoin('transmissions as t', (j) =>
        j.onRef('t.id', '=', 'm.transmission_id').onRef('t.tenant_id', '=', 'm.tenant_id'),
      )
      .selectAll('m')
      .select(['t.mail_type', 't.tags'])
      .where('m.id', '=', messageId);
    if (tenants) q = q.where('m.tenant_id', 'in', tenants);
    const row = await q.executeTakeFirst();
    if (!row) return null;
    const { mail_type, tags, ...msg } = row;
    return { msg: msg as MessagesTable, mailType: mail_type, tags: JSON.parse(tags) as string[] };
  }

  private async bounce(found: Found, status: RecipientStatus): Promise<InboundResult> {
    // Only a message we handed over can bounce later; any other state means the report is not
    // about a delivery of ours (a second DSN for a bounced message changes nothing).
    if (found.msg.state !== 'delivered') return found.msg.state === 'bounced' ? 'bounce' : 'unmatched';
    // A failure without any code is still the remote's final word: read it as permanent.
    const bounce = classifyBounce({
      ...(status.smtpCode !== null ? { code: status.smtpCode } : status.enhancedCode ? {} : { code: 550 }),
      ...(status.enhancedCode ? { enhancedCode: status.enhancedCode } : {}),
      text: status.diagnostic,
    });
    const diagnostic = status.diagnostic.replaceAll('\u0000', '').slice(0, 1000);
    const outcome: Outcome = {
      msg: found.msg,
      mailType: found.mailType,
      tags: found.tags,
      kind: 'bounced',
      attempt: reportAttempt(status, diagnostic),
      bounce,
      diagnostic,
    };
    return this.groupCommit.run(async (trx): Promise<InboundResult> => {
      const now = nowIso();
      const res = await trx
        .updateTable('messages')
        .set({ state: 'bounced', last_response: diagnostic, updated_at: now })
        .where('id', '=', found.msg.id)
        .where('tenant_id', '=', found.msg.tenant_id)
        .where('state', '=', 'delivered')
        .executeTakeFirst();
      // Another DSN for the same message got there first: it reported the bounce.
      if (Number(res.numUpdatedRows) === 0) return 'bounce';
      const event = eventFor(outcome, found.msg.attempt_count);
      event.data = { ...event.data, async: true, rule: bounce.rule, remote_mta: status.remoteMta };
      await insertEvents(trx, [event]);
      await suppressIfProven(trx, this.suppressions, outcome);
      return 'bounce';
    });
  }

  private async delayed(found: Found, status: RecipientStatus): Promise<InboundResult> {
    if (found.msg.state !== 'delivered') return 'unmatched';
    const diagnostic = status.diagnostic.replaceAll('\u0000', '').slice(0, 1000);
    const outcome: Outcome = {
      msg: found.msg,
      mailType: found.mailType,
      tags: found.tags,
      kind: 'deferred',
      attempt: reportAttempt(status, diagnostic),
      nextAttemptAtMs: 0,
      diagnostic,
    };
    const event = eventFor(outcome, found.msg.attempt_count);
    // The remote MTA retries on its own schedule, which the report does not give.
    event.data = { ...event.data, next_attempt_at: null, async: true, remote_mta: status.remoteMta };
    await this.groupCommit.run((trx) => insertEvents(trx, [event]));
    return 'delayed';
  }

  private async complaint(found: Found, feedbackType: string, userAgent: string | null): Promise<InboundResult> {
    if (found.msg.state !== 'delivered' && found.msg.state !== 'bounced') return 'unmatched';
    const { msg } = found;
    return this.groupCommit.run(async (trx): Promise<InboundResult> => {
      const earlier = await trx
        .selectFrom('events')
        .select('id')
        .where('tenant_id', '=', msg.tenant_id)
        .where('message_id', '=', msg.id)
        .where('type', '=', 'message.complained')
        .executeTakeFirst();
      if (earlier) return 'complaint';
      await insertEvents(trx, [
        {
          tenantId: msg.tenant_id,
          type: 'message.complained',
          transmissionId: msg.transmission_id,
          messageId: msg.id,
          recipient: msg.recipient,
          mailType: found.mailType,
          tags: found.tags,
          metadata: msg.metadata || '{}',
          data: { feedback_type: feedbackType, user_agent: userAgent, async: true },
        },
      ]);
      await this.suppressions.addAutomatic(trx, msg.tenant_id, {
        identifier: msg.recipient,
        type: 'email',
        reason_category: 'complaint',
        source: 'complaint',
        description: `Feedback report (${feedbackType})${userAgent ? ` from ${userAgent}` : ''}`.slice(0, 500),
      });
      return 'complaint';
    });
  }
}

/** The recipient entry about our recipient; with one failed/delayed entry only, that one. */
function pickStatus(entries: RecipientStatus[], recipient: string): RecipientStatus | null {
  const relevant = entries.filter((e) => e.action !== 'other');
  const exact = relevant.find((e) => e.recipient?.toLowerCase() === recipient.toLowerCase());
  if (exact) return exact;
  return relevant.length === 1 ? (relevant[0] ?? null) : null;
}

/** The report as an attempt record, for the event's smtp_code / enhanced_code (not stored as an attempt). */
function reportAttempt(status: RecipientStatus, diagnostic: string): AttemptRecord {
  const at = nowIso();
  return {
    startedAt: at,
    finishedAt: at,
    mxHost: status.remoteMta,
    address: null,
    tls: false,
    smtpCode: status.smtpCode,
    enhancedCode: status.enhancedCode,
    response: diagnostic,
    transcript: [],
  };
}
