import { isoAt } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { CompletionWrite } from './completions.repo.ts';
import type { SendResult } from './sender.ts';

/**
 * Bookkeeping between claimed delivery units and POSTs ("jobs"), kept free of I/O. A job is one
 * POST: one event (single policy) or up to batch_max_size events (batch), possibly taken from
 * several units; a unit normally travels in one job but may be split (after a PATCH changed the
 * policy or the batch size). A unit is finished when all its jobs are: delivered events leave
 * it, failed ones stay for the next attempt.
 */

/** Retry delays after attempts 1..7 (docs/webhooks.md "Retries and disabling"); attempt 8 failing ends the delivery. */
export const RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

export interface RetryPolicy {
  delaysMs: readonly number[];
  /** Relative jitter (0.1 = +-10 %). */
  jitter: number;
}

export interface UnitState {
  id: string;
  tenantId: string;
  oldestEventAt: string;
  /** Attempts made before this claim. */
  attempts: number;
  /** Jobs carrying part of this unit that have not finished. */
  outstanding: number;
  /** Some of its events were POSTed under this claim (an attempt counts). */
  attempted: boolean;
  failed: string[];
  /** Events handed back without being POSTed (the lane stopped sending: failure, lease). */
  unsent: string[];
  gone: boolean;
  nextAt: number;
}

export interface Job {
  parts: { unit: UnitState; eventIds: string[] }[];
  /** Event ids of this POST, and their JSON (eventJson) in the same order. */
  ids: string[];
  bodies: string[];
  /** When this node's claim on the job's units runs out (ms). */
  leaseUntil?: number;
}

/** A claimed unit with its event id list parsed. */
export interface ClaimedWork {
  id: string;
  tenantId: string;
  oldestEventAt: string;
  /** Attempts made before this claim. */
  attempts: number;
  eventIds: string[];
}

/** Delay before the attempt after `attempt` failed: Retry-After when given (1 s..24 h), else the schedule. */
export function delayFor(policy: RetryPolicy, attempt: number, res: SendResult): number {
  if (res.retryAfterMs !== null) return Math.min(Math.max(res.retryAfterMs, 1000), 86_400_000);
  const base = policy.delaysMs[attempt - 1] ?? 0;
  return Math.round(base * (1 + policy.jitter * (Math.random() * 2 - 1)));
}

/**
 * Packs claimed units into jobs; `bodies` maps event id -> its JSON. Events that no longer
 * exist are skipped; units left with no event are returned in `empty` (to be removed).
 */
export function buildJobs(
  claimed: readonly ClaimedWork[],
  bodies: ReadonlyMap<string, string>,
  policy: 'single' | 'batch',
  batchMaxSize: number,
): { jobs: Job[]; empty: UnitState[] } {
  const jobs: Job[] = [];
  const empty: UnitState[] = [];
  const perJob = policy === 'batch' ? batchMaxSize : 1;
  let job: Job | null = null;
  for (const c of claimed) {
    const unit: UnitState = {
      id: c.id,
      tenantId: c.tenantId,
      oldestEventAt: c.oldestEventAt,
      attempts: c.attempts,
      outstanding: 0,
      attempted: false,
      failed: [],
      unsent: [],
      gone: false,
      nextAt: 0,
    };
    for (const id of c.eventIds) {
      const body = bodies.get(id);
      if (body === undefined) continue;
      if (!job || job.ids.length >= perJob) {
        job = { parts: [], ids: [], bodies: [] };
        jobs.push(job);
      }
      const last = job.parts[job.parts.length - 1];
      if (last?.unit === unit) last.eventIds.push(id);
      else {
        job.parts.push({ unit, eventIds: [id] });
        unit.outstanding++;
      }
      job.ids.push(id);
      job.bodies.push(body);
    }
    if (unit.outstanding === 0) empty.push(unit);
  }
  return { jobs, empty };
}

/** The POST of a job: webhook-id is the event id of a single event, the batch id of a batch. */
export function jobBody(job: Job, policy: 'single' | 'batch'): { msgId: string; body: string; batchId: string | null } {
  if (policy === 'single' && job.ids.length === 1) {
    return { msgId: job.ids[0] as string, body: job.bodies[0] as string, batchId: null };
  }
  const batchId = newId();
  return { msgId: batchId, body: `{"batch_id":"${batchId}","events":[${job.bodies.join(',')}]}`, batchId };
}

/**
 * The write that finishes a unit whose jobs have all ended: delivered events leave it; failed
 * ones stay for the next attempt (one attempt more); events handed back unsent are due again at
 * once with their attempts unchanged, in this unit, or in a new one split off when failed events
 * keep this one for their retry.
 */
export function finishUnit(
  webhookId: string,
  unit: UnitState,
  policy: RetryPolicy,
  at: number,
  atIso = isoAt(at),
): CompletionWrite {
  const attempts = unit.attempts + (unit.attempted ? 1 : 0);
  const unsent = unit.gone ? [] : unit.unsent;
  const again = unsent.length ? { eventIds: unsent, attempts: unit.attempts, nextAt: atIso } : null;
  if (unit.failed.length > 0 && !unit.gone && attempts <= policy.delaysMs.length) {
    const retry = { eventIds: unit.failed, attempts, nextAt: isoAt(unit.nextAt) };
    const split = again && { ...again, tenantId: unit.tenantId, oldestEventAt: unit.oldestEventAt };
    return { webhookId, unit: { id: unit.id, retry, ...(split ? { split } : {}) }, at: atIso };
  }
  return { webhookId, unit: { id: unit.id, retry: again }, at: atIso };
}

/**
 * Hands back jobs that were claimed but will not be started now: their events go back to their
 * units as unsent. Returns the units this finished (all their other jobs had ended).
 */
export function unsend(jobs: readonly Job[]): UnitState[] {
  const finished: UnitState[] = [];
  for (const job of jobs) {
    for (const part of job.parts) {
      const unit = part.unit;
      unit.unsent.push(...part.eventIds);
      if (--unit.outstanding === 0) finished.push(unit);
    }
  }
  return finished;
}

/**
 * Records the outcome of a job: its attempt log entry and failure tracking, plus the writes of
 * every unit this job was the last outstanding part of.
 */
export function settleJob(
  job: Job,
  res: SendResult,
  ctx: { webhookId: string; tenantId: string; batchId: string | null; policy: RetryPolicy; at: number },
): CompletionWrite[] {
  const { at, policy } = ctx;
  const atIso = isoAt(at); // once: formatting dates was a visible share of each POST's cost
  const attempt = Math.max(...job.parts.map((p) => p.unit.attempts)) + 1;
  const writes: CompletionWrite[] = [];
  for (const part of job.parts) {
    const unit = part.unit;
    unit.outstanding--;
    unit.attempted = true;
    if (!res.ok) {
      unit.failed.push(...part.eventIds);
      unit.gone ||= res.gone;
      unit.nextAt = Math.max(unit.nextAt, at + delayFor(policy, unit.attempts + 1, res));
    }
    if (unit.outstanding === 0) writes.push(finishUnit(ctx.webhookId, unit, policy, at, atIso));
  }
  const willRetry = !res.ok && !res.gone && attempt <= policy.delaysMs.length;
  const nextAt = willRetry ? Math.max(...job.parts.map((p) => p.unit.nextAt)) : null;
  writes.push({
    webhookId: ctx.webhookId,
    ok: res.ok,
    gone: res.gone,
    at: atIso,
    log: {
      tenant_id: ctx.tenantId,
      id: newId(),
      webhook_id: ctx.webhookId,
      created_at: atIso,
      batch_id: ctx.batchId,
      event_ids: JSON.stringify(job.ids),
      attempt,
      outcome: res.ok ? 'delivered' : willRetry ? 'retrying' : 'failed',
      status_code: res.statusCode,
      duration_ms: res.durationMs,
      error: res.error,
      next_attempt_at: nextAt === null ? null : isoAt(nextAt),
      test: 0,
    },
  });
  return writes;
}

/**
 * Splits jobs that were claimed but not started into units that can be given back untouched
 * (every outstanding part of the unit is among `jobs`, so nothing of it was sent or is in flight)
 * and the jobs that must stay (they carry part of a unit that is partly in flight).
 */
export function unstarted(jobs: readonly Job[]): { release: UnitState[]; keep: Job[] } {
  const here = new Map<UnitState, number>();
  for (const j of jobs) for (const p of j.parts) here.set(p.unit, (here.get(p.unit) ?? 0) + 1);
  const release = new Set<UnitState>();
  for (const [u, n] of here) if (n === u.outstanding) release.add(u);
  // A job mixing a releasable unit with one that is not must be sent whole, so its units stay;
  // repeat until no kept job holds a released unit.
  for (let changed = true; changed; ) {
    changed = false;
    for (const j of jobs) {
      if (j.parts.every((p) => release.has(p.unit))) continue;
      for (const p of j.parts) changed = release.delete(p.unit) || changed;
    }
  }
  return { release: [...release], keep: jobs.filter((j) => !j.parts.every((p) => release.has(p.unit))) };
}

/**
 * Which due units (oldest first, from peekDue) a batch lane claims now: a batch goes when it is
 * full or its oldest unit has waited batch_max_wait_ms; before that wait is over only whole
 * batches go and the remainder keeps filling. `waitUntil`: nothing to send before then.
 */
export function pickBatch(
  due: readonly { id: string; event_count: number; next_attempt_at: string }[],
  cfg: { batchMaxSize: number; batchMaxWaitMs: number },
  maxEvents: number,
  now: number,
): { ids: string[] } | { waitUntil: number } {
  const first = due[0];
  if (!first) return { waitUntil: Number.POSITIVE_INFINITY };
  const waiting = due.reduce((n, u) => n + u.event_count, 0);
  const flushAt = Date.parse(first.next_attempt_at) + cfg.batchMaxWaitMs;
  if (waiting < cfg.batchMaxSize && flushAt > now) return { waitUntil: flushAt };
  const take =
    flushAt > now ? Math.min(maxEvents, Math.floor(waiting / cfg.batchMaxSize) * cfg.batchMaxSize) : maxEvents;
  const ids: string[] = [];
  let n = 0;
  for (const u of due) {
    if (ids.length && n + u.event_count > take) break;
    ids.push(u.id);
    n += u.event_count;
  }
  return { ids };
}
