/**
 * What a delivery attempt was (the attempt record, MTA-STS verdict included) and what its result
 * means for the message, as an Outcome to record: pure functions, so the worker only moves
 * messages around and the rules are in one place.
 * - 2xx: delivered. 5xx classified as permanent (bounce rules): bounced.
 * - Anything transient (4xx, timeouts, connection trouble): deferred to the next slot of the
 *   retry schedule, or failed once the schedule (72 h from acceptance) is used up.
 */
import { classifyBounce, nextAttemptAt } from '../outcomes/bounce-rules.ts';
import type { Route } from './destination.ts';
import type { AttemptRecord, MessageContext, Outcome } from '../outcomes/outcomes.ts';
import type { PolicyLookup } from './smtp/mta-sts.ts';
import { mxMatches } from './smtp/mta-sts-policy.ts';
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

/** What one attempt was (host, TLS, the reply, the transcript), as the attempt row records it. */
export function attemptRecord(
  startedAt: string,
  result: AttemptResult,
  host: string | null,
  address: string | null,
  route?: Pick<Route, 'mtaSts'>,
): AttemptRecord {
  const sts = route?.mtaSts ?? null;
  return {
    startedAt,
    finishedAt: new Date().toISOString(),
    mxHost: host,
    address,
    tls: result.tls,
    tlsVerified: result.tls ? (result.tlsVerified ?? null) : null,
    mtaSts: sts?.policy?.mode ?? null,
    smtpCode: result.code ?? null,
    enhancedCode: result.enhancedCode ?? null,
    response: result.response,
    transcript: sts ? [`*: ${sts.note}`, ...policyVerdict(sts, result, host), ...result.transcript] : result.transcript,
  };
}

/**
 * What the policy says about this attempt. Under `testing` the message went out anyway (RFC 8461
 * 5): the line records what `enforce` would have refused, for the operator to see.
 */
function policyVerdict(sts: PolicyLookup, result: AttemptResult, host: string | null): string[] {
  const p = sts.policy;
  if (!p || p.mode === 'none' || host === null) return [];
  const problems = [
    ...(mxMatches(host, p.mx) ? [] : [`${host} is not in the policy's mx list`]),
    ...(!result.tls ? ['no TLS'] : result.tlsVerified === false ? ['certificate not verified'] : []),
  ];
  if (problems.length === 0) return [`*: MTA-STS ${p.mode}: ${host}, TLS, certificate verified`];
  return p.mode === 'testing'
    ? [`*: MTA-STS testing: enforce would refuse this (${problems.join(', ')}); not enforced`]
    : [`*: MTA-STS enforce: ${problems.join(', ')}; nothing sent`];
}

/** Classification of a failed attempt: transient (defer) or a typed bounce. */
export function classifyFailure(result: AttemptResult & { ok: false }) {
  const bounce = classifyBounce({
    ...(result.code !== undefined ? { code: result.code } : {}),
    ...(result.enhancedCode !== undefined ? { enhancedCode: result.enhancedCode } : {}),
    text: result.response,
  });
  // The SMTP client knows connection-level failures are transient whatever the code says.
  return { transient: !result.permanent || bounce.transient, bounce };
}
