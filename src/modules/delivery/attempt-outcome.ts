/**
 * What a delivery attempt's result means for the message, as an Outcome to record: pure
 * functions, so the worker only moves messages around and the rules are in one place.
 * - 2xx: delivered. 5xx classified as permanent (bounce rules): bounced.
 * - Anything transient (4xx, timeouts, connection trouble): deferred to the next slot of the
 *   retry schedule, or failed once the schedule (72 h from acceptance) is used up.
 */
import { nextAttemptAt } from './bounce-rules.ts';
import { classifyFailure } from './destination.ts';
import type { AttemptRecord, MessageContext, Outcome } from './outcomes.ts';
import type { AttemptResult } from './smtp/smtp-client.ts';

/** The message and what deferring it needs: when its transmission was accepted. */
export interface OutcomeContext extends MessageContext {
  createdAtMs: number;
}

const base = (c: OutcomeContext) => ({ msg: c.msg, mailType: c.mailType, tags: c.tags });

/** Deferred until the next retry slot, or failed when the 72 h schedule is over. */
export function deferral(c: OutcomeContext, attempt: AttemptRecord | null, diagnostic: string, nowMs: number): Outcome {
  const at = nextAttemptAt(c.msg.attempt_count + 1, c.createdAtMs, nowMs);
  if (at === null)
    return { ...base(c), kind: 'failed', attempt, reason: `retries exhausted after 72 h: ${diagnostic}` };
  return { ...base(c), kind: 'deferred', attempt, nextAttemptAtMs: at, diagnostic };
}

/** The outcome of one SMTP attempt. */
export function outcomeOf(c: OutcomeContext, result: AttemptResult, attempt: AttemptRecord, nowMs: number): Outcome {
  if (result.ok) return { ...base(c), kind: 'delivered', attempt };
  const classified = classifyFailure(result);
  if (classified.transient) return deferral(c, attempt, result.response, nowMs);
  return { ...base(c), kind: 'bounced', attempt, bounce: classified.bounce, diagnostic: result.response };
}

/** No route to the domain: null MX / NXDOMAIN / only private addresses bounce; DNS trouble defers. */
export function routeFailureOutcome(
  c: OutcomeContext,
  r: { permanent: boolean; reason: string; enhancedCode: string; mtaSts?: 'enforce' | 'testing' | 'none' },
  nowMs: number,
): Outcome {
  const at = new Date(nowMs).toISOString();
  const attempt: AttemptRecord = {
    startedAt: at,
    finishedAt: at,
    mxHost: null,
    address: null,
    tls: false,
    tlsVerified: null,
    mtaSts: r.mtaSts ?? null,
    smtpCode: null,
    enhancedCode: r.permanent ? r.enhancedCode : null,
    response: r.reason,
    transcript: [`${r.mtaSts ? 'MTA-STS' : 'DNS'}: ${r.reason}`],
  };
  if (!r.permanent) return deferral(c, attempt, r.reason, nowMs);
  const res = {
    ok: false as const,
    permanent: true,
    code: 550,
    enhancedCode: r.enhancedCode,
    response: r.reason,
    tls: false,
    transcript: [],
    stage: 'connect' as const,
  };
  return { ...base(c), kind: 'bounced', attempt, bounce: classifyFailure(res).bounce, diagnostic: r.reason };
}
