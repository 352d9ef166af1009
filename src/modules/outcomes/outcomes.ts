import { insertMany } from '../../db/batch.ts';
import { runSql } from '../../db/dialect.ts';
import { bindsArrays } from '../../db/tuning.ts';
import type { Executor } from '../../db/executor.ts';
import type { Database } from '../../db/index.ts';
import type { MessageState } from '../../db/message-state.ts';
import type { DeliveryAttemptsTable, MessagesTable } from '../../db/schema.ts';
import { isoAt, nowIso } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import { insertEvents } from '../events/events.repo.ts';
import type { NewEvent } from '../events/events.types.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import type { BounceClassification } from './bounce-rules.ts';
import { OUTCOMES_PG, outcomesSqlite } from './queue.sql.ts';

/**
 * Outcomes of delivery attempts: what the delivery worker found (attempt-outcome.ts there) made
 * into the message's state, its attempt row and its event. This folder owns every write of a
 * message's state after acceptance (queue.sql.ts), so delivery and the reading of reports
 * (src/modules/feedback/) both depend on it and on nothing of each other: the delivery worker's
 * outcomes are written here, a report's later bounce by report-outcomes.ts.
 */

export interface AttemptRecord {
  startedAt: string;
  finishedAt: string;
  mxHost: string | null;
  address: string | null;
  tls: boolean;
  /** With TLS: whether the certificate verified; null without TLS (or not known). */
  tlsVerified?: boolean | null;
  /** The recipient domain's MTA-STS policy mode; null when it has none (or via a relay). */
  mtaSts?: 'enforce' | 'testing' | 'none' | null;
  smtpCode: number | null;
  enhancedCode: string | null;
  response: string;
  transcript: string[];
}

export interface MessageContext {
  msg: MessagesTable;
  mailType: string;
  tags: string[];
}

export type Outcome = MessageContext &
  (
    | { kind: 'delivered'; attempt: AttemptRecord | null; sandbox?: boolean }
    | { kind: 'bounced'; attempt: AttemptRecord | null; bounce: BounceClassification; diagnostic: string }
    | { kind: 'deferred'; attempt: AttemptRecord | null; nextAttemptAtMs: number; diagnostic: string }
    | { kind: 'failed'; attempt: AttemptRecord | null; reason: string }
  );

/** The event an outcome reports (also for the reports of later bounces and delays: report-outcomes.ts). */
export function eventFor(o: Outcome, attemptNo: number): NewEvent {
  const base = {
    tenantId: o.msg.tenant_id,
    transmissionId: o.msg.transmission_id,
    messageId: o.msg.id,
    recipient: o.msg.recipient,
    mailType: o.mailType,
    tags: o.tags,
    // The stored JSON text as is (NewEvent.metadata): no parse and re-serialization per event.
    metadata: o.msg.metadata || '{}',
    role: o.msg.recipient_role ?? null,
  };
  const a = o.attempt;
  switch (o.kind) {
    case 'delivered':
      return {
        ...base,
        type: 'message.delivered',
        data: {
          mx_host: a?.mxHost ?? null,
          smtp_response: a?.response ?? null,
          tls: a?.tls ?? false,
          attempt: attemptNo,
          ...(o.sandbox ? { sandbox: true } : {}),
        },
      };
    case 'bounced':
      return {
        ...base,
        type: 'message.bounced',
        data: {
          bounce_type: o.bounce.bounceType,
          category: o.bounce.category,
          smtp_code: a?.smtpCode ?? null,
          enhanced_code: a?.enhancedCode ?? null,
          diagnostic: o.diagnostic,
        },
      };
    case 'deferred':
      return {
        ...base,
        type: 'message.deferred',
        data: {
          smtp_code: a?.smtpCode ?? null,
          enhanced_code: a?.enhancedCode ?? null,
          diagnostic: o.diagnostic,
          next_attempt_at: isoAt(o.nextAttemptAtMs),
        },
      };
    case 'failed':
      return { ...base, type: 'message.failed', data: { reason: o.reason } };
  }
}

const STATE: Record<Outcome['kind'], MessageState> = {
  delivered: 'delivered',
  bounced: 'bounced',
  deferred: 'deferred',
  failed: 'failed',
};

/**
 * Remote servers' replies end up in text columns. PostgreSQL text cannot hold U+0000 (the whole
 * batch would fail, and its messages would be sent again after the lease), so a NUL a hostile
 * or broken MX puts in a reply is replaced before anything is written.
 */
function withoutNul(o: Outcome): Outcome {
  const texts = [
    'diagnostic' in o ? o.diagnostic : '',
    'reason' in o ? o.reason : '',
    o.attempt?.response ?? '',
    o.attempt?.mxHost ?? '',
    ...(o.attempt?.transcript ?? []),
  ];
  // The usual case (no NUL anywhere) costs one scan and no copies on this hot path.
  if (!texts.some((t) => typeof t === 'string' && t.includes('\u0000'))) return o;
  const clean = (t: string) => (t.includes('\u0000') ? t.replaceAll('\u0000', '\uFFFD') : t);
  const out = { ...o } as Outcome & { diagnostic?: string; reason?: string };
  if ('diagnostic' in o && typeof o.diagnostic === 'string') out.diagnostic = clean(o.diagnostic);
  if ('reason' in o && typeof o.reason === 'string') out.reason = clean(o.reason);
  if (o.attempt) {
    out.attempt = {
      ...o.attempt,
      response: clean(o.attempt.response),
      transcript: o.attempt.transcript.map(clean),
      ...(o.attempt.mxHost ? { mxHost: clean(o.attempt.mxHost) } : {}),
    };
  }
  return out;
}

/** Outcomes per UPDATE statement on SQLite: 5 bound values each, well under its limit. */
const UPDATE_CHUNK = 500;

/** Moves the messages to their outcome state; returns the ids this worker still held (and wrote). */
async function updateStates(trx: Executor, workerId: string, now: string, outcomes: Outcome[]): Promise<Set<string>> {
  const written = new Set<string>();
  // Sorted by id, so concurrent batches on PostgreSQL lock rows in one order (no deadlocks).
  const sorted = [...outcomes].sort((a, b) => (a.msg.id < b.msg.id ? -1 : a.msg.id > b.msg.id ? 1 : 0));
  const row = (o: Outcome) =>
    [
      o.msg.id,
      STATE[o.kind],
      attemptNoOf(o),
      o.kind === 'deferred' ? isoAt(o.nextAttemptAtMs) : o.msg.next_attempt_at,
      o.attempt?.response ?? (o.kind === 'failed' ? o.reason : o.kind === 'delivered' ? 'sandbox' : null),
    ] as const;
  // One statement with array parameters where the database binds them (PostgreSQL), else chunks.
  if (bindsArrays(trx)) {
    const rows = sorted.map(row);
    const columns = [0, 1, 2, 3, 4].map((c) => rows.map((r) => r[c]));
    for (const r of await runSql<{ id: string }>(trx, OUTCOMES_PG, [now, workerId, ...columns])) written.add(r.id);
    return written;
  }
  for (let i = 0; i < sorted.length; i += UPDATE_CHUNK) {
    const part = sorted.slice(i, i + UPDATE_CHUNK);
    const params = [now, ...part.flatMap(row), workerId];
    for (const r of await runSql<{ id: string }>(trx, outcomesSqlite(trx, part.length), params)) written.add(r.id);
  }
  return written;
}

const attemptNoOf = (o: Outcome) => o.msg.attempt_count + (o.attempt ? 1 : 0);

/** An automatic suppression an outcome or a report causes. */
export interface Suppress {
  tenant: string;
  identifier: string;
  reason_category: 'hard_bounce' | 'complaint';
  source: 'bounce' | 'complaint';
  description: string;
}

/**
 * The automatic suppression of a bounce that proves the address bad (bounce-rules.ts decides),
 * for bounces at delivery and in later reports (report-outcomes.ts) alike; null otherwise.
 */
export function bounceSuppression(o: Outcome): Suppress | null {
  if (o.kind !== 'bounced' || !o.bounce.suppress) return null;
  return {
    tenant: o.msg.tenant_id,
    identifier: o.msg.recipient,
    reason_category: 'hard_bounce',
    source: 'bounce',
    description: o.diagnostic.slice(0, 500),
  };
}

async function suppressIfProven(trx: Executor, suppressions: SuppressionsService, o: Outcome): Promise<void> {
  const s = bounceSuppression(o);
  if (!s) return;
  await suppressions.addAutomatic(trx, s.tenant, {
    identifier: s.identifier,
    type: 'email',
    reason_category: s.reason_category,
    source: s.source,
    description: s.description,
  });
}

/**
 * Records a batch of outcomes in one transaction: message state, the attempt with its SMTP
 * transcript, the event (the webhook outbox), and an automatic suppression for bad addresses.
 * Only rows this worker still holds are written: if our lease ran out and another worker took
 * the message, that worker reports it, so no outcome is reported twice.
 */
export async function recordOutcomes(
  database: Database,
  suppressions: SuppressionsService,
  workerId: string,
  outcomes: Outcome[],
): Promise<number> {
  if (outcomes.length === 0) return 0;
  return database.db.transaction().execute(async (trx) => {
    const now = nowIso();
    const attempts: DeliveryAttemptsTable[] = [];
    const events: NewEvent[] = [];
    const cleaned = outcomes.map(withoutNul);
    const held = await updateStates(trx, workerId, now, cleaned);
    for (const o of cleaned) {
      if (!held.has(o.msg.id)) continue;
      const attemptNo = attemptNoOf(o);
      if (o.attempt) {
        attempts.push({
          tenant_id: o.msg.tenant_id,
          id: newId(),
          message_id: o.msg.id,
          attempt: attemptNo,
          started_at: o.attempt.startedAt,
          finished_at: o.attempt.finishedAt,
          mx_host: o.attempt.mxHost,
          address: o.attempt.address,
          tls: o.attempt.tls ? 1 : 0,
          tls_verified: o.attempt.tlsVerified == null ? null : o.attempt.tlsVerified ? 1 : 0,
          mta_sts: o.attempt.mtaSts ?? null,
          outcome: o.kind,
          smtp_code: o.attempt.smtpCode,
          enhanced_code: o.attempt.enhancedCode,
          response: o.attempt.response.slice(0, 2000),
          transcript: o.attempt.transcript.join('\n').slice(0, 20_000),
        });
      }
      events.push(eventFor(o, attemptNo));
      await suppressIfProven(trx, suppressions, o);
    }
    await insertMany(trx, 'delivery_attempts', attempts);
    await insertEvents(trx, events);
    return held.size;
  });
}
