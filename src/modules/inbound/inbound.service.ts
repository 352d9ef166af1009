import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import type { GroupCommit } from '../../db/group-commit.ts';
import { countWarmupFeedback } from '../warmup/ledger.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import type { TrackingService } from '../tracking/tracking.service.ts';
import { type FeedbackHook, ReportWriter } from './report-batch.ts';
import { type InboundReport, parseInbound } from './report-parser.ts';
import type { VerpSigner } from '../outcomes/verp.ts';

/**
 * What an inbound report does to our messages (docs/inbound.md):
 * - DSN `failed` for a `delivered` message: the message becomes `bounced`, `message.bounced`
 *   with `data.async: true` and the bounce rules' classification, and the same automatic
 *   suppression a synchronous bounce gives (src/modules/outcomes/: eventFor, bounceSuppression);
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

/**
 * Asynchronous bounces and complaints count against the warmup day of the address the message
 * left from (src/modules/warmup/ledger.ts; synchronous bounces are counted by the source picker).
 */
const countForWarmup: FeedbackHook = async (trx, feedback) => {
  const now = Date.now();
  for (const f of feedback) await countWarmupFeedback(trx, f.msg.source_address, f.kind, now);
};

export class InboundService {
  readonly counter: Counter<'result'>;
  private readonly writer: ReportWriter;

  constructor(
    /** Writes go through the group commit, many reports per transaction (report-batch.ts). */
    groupCommit: GroupCommit,
    suppressions: SuppressionsService,
    verp: VerpSigner,
    registry: Registry,
    private readonly logger: Logger,
    private readonly tracking: TrackingService,
  ) {
    this.counter = inboundCounter(registry);
    this.writer = new ReportWriter(groupCommit, suppressions, verp, countForWarmup);
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
      // Any message to the mailto address is the request (RFC 2369); what it says does not matter.
      const result: InboundResult =
        target.kind === 'unsubscribe'
          ? (await this.tracking.unsubscribe(target.messageId, 'mailto', { ip: envelope.remote, userAgent: '' }))
            ? 'unsubscribe'
            : 'unmatched'
          : await this.apply(report, target);
      this.count(result);
      if (result === 'unmatched') {
        // Every kind of target, the mailto address too (it was counted but not logged before).
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
    if (report.kind === 'other' || target.kind === 'unsubscribe') return 'unmatched';
    return this.writer.apply(report, target.kind === 'verp' ? target : { kind: 'fbl', tenants: target.tenants });
  }
}
