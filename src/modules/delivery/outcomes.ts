import { insertMany } from '../../db/batch.ts';
import { isPostgres, runSql, shapedSql } from '../../db/dialect.ts';
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

/** The event an outcome reports (also used for asynchronous bounces, src/modules/inbound/). */
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

/*
 * One UPDATE for a whole batch of outcomes instead of one statement per message: on PostgreSQL
 * each statement is a round trip inside the transaction, and on both backends building a
 * statement per message through Kysely cost more CPU than running it. Values are always bound.
 *
 * Ownership is `locked_by = <this worker>` alone: claims set it together with state 'sending'
 * and every other write clears it, so it implies 'sending' under our lease. Leaving the state out
 * matters on PostgreSQL: with it, stale statistics (a queue's state counts change by thousands a
 * second) led the planner to walk every 'sending' row for each outcome (nested loop over
 * messages_due); without it the plan is one primary-key lookup per outcome.
 */
const PG_UPDATE =
  'update messages set state = v.state, attempt_count = v.attempt_count, next_attempt_at = v.next_attempt_at, ' +
  'locked_until = null, locked_by = null, last_response = v.last_response, updated_at = $1 ' +
  'from unnest($3::text[], $4::text[], $5::integer[], $6::text[], $7::text[]) ' +
  'as v(id, state, attempt_count, next_attempt_at, last_response) ' +
  'where messages.id = v.id and messages.locked_by = $2 returning messages.id';

/** SQLite: VALUES columns are column1..column5; binding is positional in text order. */
const sqliteUpdate = shapedSql(600, (_param, _dialect, rows: number) => {
  const tuples = Array.from({ length: rows }, () => '(?, ?, ?, ?, ?)').join(', ');
  return (
    'update messages set state = v.column2, attempt_count = v.column3, next_attempt_at = v.column4, ' +
    'locked_until = null, locked_by = null, last_response = v.column5, updated_at = ? ' +
    `from (values ${tuples}) as v where messages.id = v.column1 and messages.locked_by = ? returning messages.id`
  );
});

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
  if (isPostgres(trx)) {
    const rows = sorted.map(row);
    const columns = [0, 1, 2, 3, 4].map((c) => rows.map((r) => r[c]));
    for (const r of await runSql<{ id: string }>(trx, PG_UPDATE, [now, workerId, ...columns])) written.add(r.id);
    return written;
  }
  for (let i = 0; i < sorted.length; i += UPDATE_CHUNK) {
    const part = sorted.slice(i, i + UPDATE_CHUNK);
    const params = [now, ...part.flatMap(row), workerId];
    for (const r of await runSql<{ id: string }>(trx, sqliteUpdate(trx, part.length), params)) written.add(r.id);
  }
  return written;
}

const attemptNoOf = (o: Outcome) => o.msg.attempt_count + (o.attempt ? 1 : 0);

/**
 * The automatic suppression of a bounce that proves the address bad (bounce-rules.ts decides),
 * for synchronous bounces here and asynchronous ones (DSNs, src/modules/inbound/) alike.
 */
export async function suppressIfProven(trx: Executor, suppressions: SuppressionsService, o: Outcome): Promise<void> {
  if (o.kind !== 'bounced' || !o.bounce.suppress) return;
  await suppressions.addAutomatic(trx, o.msg.tenant_id, {
    identifier: o.msg.recipient,
    type: 'email',
    reason_category: 'hard_bounce',
    source: 'bounce',
    description: o.diagnostic.slice(0, 500),
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
