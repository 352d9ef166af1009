import type { Transaction } from 'kysely';
import { dialectSql, runSql } from '../../db/dialect.ts';
import type { GroupCommit } from '../../db/group-commit.ts';
import type { DB, MessagesTable } from '../../db/schema.ts';
import type { NewEvent } from '../events/events.types.ts';
import type { Suppress } from '../outcomes/outcomes.ts';
import { type ReportedBounce, recordReportOutcomes } from '../outcomes/report-outcomes.ts';
import type { VerpSigner } from '../outcomes/verp.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { bounceOf, complaintEvent, delayedEvent, outcomeBase, pickStatus, type Row } from './report-effects.ts';
import type { InboundReport } from './report-parser.ts';

/**
 * Writes what reports do, many reports per transaction (performance): one lookup of
 * all their messages, then their effects in one go by the outcomes module
 * (src/modules/outcomes/report-outcomes.ts: one UPDATE for all bounced messages, one insert of
 * all events, one upsert of each tenant's suppressions). Reports that arrive while a batch is
 * being written form the next batch, so under load batches grow and the cost per report falls;
 * alone, a report is a batch of one. Each report's promise settles only after the transaction holding it commits, so
 * the listener still answers 250 only once the result is durable.
 *
 * The batch runs as one unit of the group commit (on SQLite it shares the transaction with
 * other writers). If it fails, each report is written again alone, so one bad report never costs
 * the others their answer. Within a batch, reports are applied in arrival order as if one after
 * another: a second DSN for a message bounced earlier in the batch finds it `bounced`.
 */

export type ReportResult = 'bounce' | 'delayed' | 'complaint' | 'unmatched';

/** A report that needs the database: a DSN or a complaint. */
export type DbReport = Extract<InboundReport, { kind: 'dsn' | 'complaint' }>;

/** Where the report was sent: a verified VERP token's message, or `fbl@` of some tenants (null: any). */
export type ReportTarget = { kind: 'verp'; messageId: string } | { kind: 'fbl'; tenants: string[] | null };

interface Pending {
  report: DbReport;
  target: ReportTarget;
  resolve(result: ReportResult): void;
  reject(err: unknown): void;
}

/**
 * Called in the transaction with the bounces and complaints a batch recorded (each message's
 * whole row), for whatever else counts them (e.g. per sending address); null when none.
 */
export type FeedbackHook = (
  trx: Transaction<DB>,
  feedback: { msg: MessagesTable; kind: 'bounced' | 'complained' }[],
) => Promise<void>;

const MAX_BATCH = 256;
/** Message ids per lookup statement (a batch's reports may each name a few). */
const LOOKUP_CHUNK = 500;

const LOOKUP = dialectSql({
  sqlite:
    'select m.*, t.mail_type as mail_type, t.tags as tags from messages m ' +
    'join transmissions t on t.id = m.transmission_id and t.tenant_id = m.tenant_id ' +
    'where m.id in (select value from json_each(?))',
  postgres:
    'select m.*, t.mail_type as mail_type, t.tags as tags from messages m ' +
    'join transmissions t on t.id = m.transmission_id and t.tenant_id = m.tenant_id ' +
    'where m.id = any($1::text[])',
});

export class ReportWriter {
  private queue: Pending[] = [];
  private scheduled = false;
  private running = false;

  constructor(
    private readonly groupCommit: GroupCommit,
    private readonly suppressions: SuppressionsService,
    private readonly verp: VerpSigner,
    private readonly onFeedback: FeedbackHook | null = null,
  ) {}

  /** Applies one report; resolves after the transaction that holds its effects commits. */
  apply(report: DbReport, target: ReportTarget): Promise<ReportResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ report, target, resolve, reject });
      if (!this.scheduled && !this.running) {
        this.scheduled = true;
        // Every report parsed in this event-loop turn joins the first batch.
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    this.scheduled = false;
    this.running = true;
    try {
      while (this.queue.length > 0) await this.runBatch(this.queue.splice(0, MAX_BATCH));
    } finally {
      this.running = false;
    }
  }

  private async runBatch(batch: Pending[]): Promise<void> {
    try {
      const results = await this.groupCommit.run((trx) => this.write(trx, batch));
      for (const [i, p] of batch.entries()) p.resolve(results[i] ?? 'unmatched');
    } catch (err) {
      if (batch.length === 1) {
        batch[0]?.reject(err);
        return;
      }
      for (const p of batch) {
        try {
          p.resolve((await this.groupCommit.run((trx) => this.write(trx, [p])))[0] ?? 'unmatched');
        } catch (e) {
          p.reject(e);
        }
      }
    }
  }

  /** Pure database work (the group commit may run it twice): results in batch order. */
  private async write(trx: Transaction<DB>, batch: Pending[]): Promise<ReportResult[]> {
    const candidates = batch.map((p) => this.candidates(p));
    const rows = await this.load(trx, [...new Set(candidates.flatMap((c) => c.ids))]);
    const found = batch.map((p, i) => pick(p.target, candidates[i] as Candidates, rows));
    const complainedBefore = await this.complained(trx, batch, found);

    const results: ReportResult[] = [];
    /** State as this batch leaves it, for later reports in the same batch. */
    const state = new Map<string, string>();
    const bounces: (ReportedBounce & { msg: MessagesTable })[] = [];
    const events: NewEvent[] = [];
    const suppress: Suppress[] = [];
    const feedback: { msg: MessagesTable; kind: 'bounced' | 'complained' }[] = [];
    for (const [i, p] of batch.entries()) {
      const row = found[i];
      if (!row) {
        results.push('unmatched');
        continue;
      }
      const current = state.get(row.id) ?? row.state;
      if (p.report.kind === 'complaint') {
        if (current !== 'delivered' && current !== 'bounced') {
          results.push('unmatched');
          continue;
        }
        results.push('complaint');
        if (complainedBefore.has(row.id)) continue;
        complainedBefore.add(row.id);
        const { feedbackType, userAgent } = p.report;
        events.push(complaintEvent(row, feedbackType, userAgent));
        feedback.push({ msg: outcomeBase(row).msg, kind: 'complained' });
        suppress.push({
          tenant: row.tenant_id,
          identifier: row.recipient,
          reason_category: 'complaint',
          source: 'complaint',
          description: `Feedback report (${feedbackType})${userAgent ? ` from ${userAgent}` : ''}`.slice(0, 500),
        });
        continue;
      }
      const status = pickStatus(p.report.recipients, row.recipient);
      if (!status) {
        results.push('unmatched');
        continue;
      }
      if (status.action === 'failed') {
        // Only a message we handed over can bounce later; a second DSN for a bounced message
        // changes nothing; any other state means the report is not about a delivery of ours.
        if (current !== 'delivered') {
          results.push(current === 'bounced' ? 'bounce' : 'unmatched');
          continue;
        }
        state.set(row.id, 'bounced');
        results.push('bounce');
        const b = bounceOf(row, status);
        bounces.push({
          id: row.id,
          tenant: row.tenant_id,
          response: b.outcome.diagnostic,
          event: b.event,
          suppress: b.suppress,
          msg: b.outcome.msg,
        });
        continue;
      }
      if (current !== 'delivered') {
        results.push('unmatched');
        continue;
      }
      results.push('delayed');
      events.push(delayedEvent(row, status));
    }

    const moved = await recordReportOutcomes(trx, this.suppressions, { bounces, events, suppress });
    // A message another node bounced first was reported by that node (result still 'bounce').
    for (const b of bounces) if (moved.has(b.id)) feedback.push({ msg: b.msg, kind: 'bounced' });
    if (this.onFeedback && feedback.length > 0) await this.onFeedback(trx, feedback);
    return results;
  }

  private candidates(p: Pending): Candidates {
    if (p.target.kind === 'verp') return { ids: [p.target.messageId], signed: [p.target.messageId] };
    // fbl@: the first token that verifies decides; else our Message-IDs, first found wins.
    for (const token of p.report.refs.tokens) {
      const id = this.verp.verify(token);
      if (id) return { ids: [id], signed: [id] };
    }
    return { ids: p.report.refs.messageIds, signed: [] };
  }

  private async load(trx: Transaction<DB>, ids: string[]): Promise<Map<string, Row>> {
    const rows = new Map<string, Row>();
    for (let i = 0; i < ids.length; i += LOOKUP_CHUNK) {
      for (const r of await runSql<Row>(trx, LOOKUP, [ids.slice(i, i + LOOKUP_CHUNK)])) rows.set(r.id, r);
    }
    return rows;
  }

  /** Messages of the batch's complaints that already have their message.complained. */
  private async complained(trx: Transaction<DB>, batch: Pending[], found: (Row | null)[]): Promise<Set<string>> {
    const rows = found.filter((r, i): r is Row => !!r && batch[i]?.report.kind === 'complaint');
    if (rows.length === 0) return new Set();
    const earlier = await trx
      .selectFrom('events')
      .select('message_id')
      .where('tenant_id', 'in', [...new Set(rows.map((r) => r.tenant_id))])
      .where(
        'message_id',
        'in',
        rows.map((r) => r.id),
      )
      .where('type', '=', 'message.complained')
      .execute();
    return new Set(earlier.map((e) => e.message_id ?? ''));
  }
}

interface Candidates {
  /** Message ids to look up. */
  ids: string[];
  /** Of those, the one a verified token names (the tenant check of fbl@ still applies). */
  signed: string[];
}

/** The message a report is about: a VERP token's message, or for fbl@ one of the allowed tenants'. */
function pick(target: ReportTarget, c: Candidates, rows: Map<string, Row>): Row | null {
  if (target.kind === 'verp') return rows.get(target.messageId) ?? null;
  if (target.tenants !== null && target.tenants.length === 0) return null;
  const allowed = (r: Row | undefined): r is Row =>
    !!r && (target.tenants === null || target.tenants.includes(r.tenant_id));
  if (c.signed.length > 0) {
    const r = rows.get(c.signed[0] as string);
    return allowed(r) ? r : null;
  }
  for (const id of c.ids) {
    const r = rows.get(id);
    if (allowed(r)) return r;
  }
  return null;
}
