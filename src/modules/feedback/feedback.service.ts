import type { Logger } from 'pino';
import type { GroupCommit } from '../../db/group-commit.ts';
import { countWarmupFeedback } from '../warmup/ledger.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { type FeedbackHook, type ReportResult, type ReportTarget, ReportWriter } from './report-batch.ts';
import { type InboundReport, parseInbound } from './report-parser.ts';
import type { VerpSigner } from '../outcomes/verp.ts';

/** What a report did: its effect, `auto_reply` (nothing), or `unmatched` (no message of ours). */
export type FeedbackResult = ReportResult | 'auto_reply';

/**
 * Asynchronous bounces and complaints count against the warmup day of the address the message
 * left from (src/modules/warmup/ledger.ts; synchronous bounces are counted by the source picker).
 */
const countForWarmup: FeedbackHook = async (trx, feedback) => {
  const now = Date.now();
  for (const f of feedback) await countWarmupFeedback(trx, f.msg.source_address, f.kind, now);
};

/**
 * What an inbound report does to our messages (docs/inbound.md):
 * - DSN `failed` for a `delivered` message: the message becomes `bounced`, `message.bounced`
 *   with `data.async: true` and the bounce rules' classification, and the same automatic
 *   suppression a synchronous bounce gives (src/modules/outcomes/: eventFor, bounceSuppression);
 * - DSN `delayed`: `message.deferred` with `data.async: true`, the state stays `delivered`;
 * - ARF: `message.complained` (once per message) and a `complaint` suppression;
 * - auto-replies change nothing (the listener counts them); whatever matches none of our messages
 *   is `unmatched` (counted, and logged without its body, by the listener).
 * Which message a report is about comes from where it was sent (a signed VERP token), or, for
 * `fbl@` reports, from a signed token or our Message-ID inside it, within the tenants that own
 * that return-path domain: a report can never reach another tenant's message. The addresses
 * themselves are matched at RCPT TO by the handlers of recipients.ts.
 */
export class FeedbackService {
  private readonly writer: ReportWriter;

  constructor(
    /** Writes go through the group commit, many reports per transaction (report-batch.ts). */
    groupCommit: GroupCommit,
    suppressions: SuppressionsService,
    private readonly verp: VerpSigner,
    private readonly logger: Logger,
  ) {
    this.writer = new ReportWriter(groupCommit, suppressions, verp, countForWarmup);
  }

  /** The message id a `bounces+<token>@` address stands for; null when the token does not verify. */
  messageOfToken(token: string): string | null {
    return this.verp.verify(token);
  }

  /**
   * What a received message is. One function for every recipient, so that the listener reads a
   * message sent to several of our addresses once (ReceivedMessage.read).
   */
  readonly readReport = async (raw: Buffer): Promise<InboundReport> => {
    try {
      return await parseInbound(raw);
    } catch (err) {
      // Broken MIME is the sender's problem, not a reason to make it retry: nothing matched.
      this.logger.info({ err: (err as Error).message }, 'inbound message could not be parsed');
      return { kind: 'other', refs: { tokens: [], messageIds: [] } };
    }
  };

  /** Applies a report sent to `target`; resolves once its effects are durable. */
  async apply(report: InboundReport, target: ReportTarget): Promise<FeedbackResult> {
    if (report.kind === 'auto_reply') return 'auto_reply';
    if (report.kind === 'other') return 'unmatched';
    return this.writer.apply(report, target);
  }
}
