import { RENDER_FAILED } from '../content/template-language.ts';
import { observeRender } from './delivery-metrics.ts';
import { replyText } from '../pacing/pacing.service.ts';
import { attemptRecord, outcomeOf } from './attempt-outcome.ts';
import { connectRoute, type Route } from './destination.ts';
import type { Outcome } from '../outcomes/outcomes.ts';
import type { RenderedMessage } from './render/renderer.ts';
import type { SmtpSession } from './smtp/smtp-client.ts';
import type { LaneTarget, SessionEnd, SlotHandover, Turn } from './slot-handover.ts';
import {
  contextOf,
  type DomainQueue,
  type Job,
  RENDER_AHEAD,
  type ResolvedWorkerOptions,
  type Taken,
} from './worker-types.ts';

/**
 * One SMTP session ("lane") draining a domain queue: the per-message half of the delivery worker
 * (worker.ts claims, sorts into queues and decides how many lanes a queue gets). Apart from the
 * worker because it is the hot path: render ahead, pace, send pipelined, record.
 */

/** What a lane needs from its worker. */
export interface LaneHost {
  readonly o: ResolvedWorkerOptions;
  isRunning(): boolean;
  /** Puts claimed-but-unsent jobs back in the queue, due now or at `atMs`, no attempt counted. */
  release(jobs: Job[], atMs?: number): Promise<void>;
  complete(o: Outcome): void;
  defer(job: Job, attempt: Outcome['attempt'], diagnostic: string): void;
  /** Whether the session goes to another destination of its site, between two messages. */
  readonly handover: Pick<SlotHandover, 'handOver' | 'carryOn' | 'move'>;
}

/** The lane's connection slot: stops it between messages when lost (docs/pacing.md). */
export interface LaneGuard {
  readonly bucket: string;
  readonly lost: boolean;
}

/**
 * Drains `t.q` over one session to `t.route`, at most `maxMessages` messages, while `guard`
 * holds; the session may go on to other destinations its host serves (slot-handover.ts), and `t`
 * then names the one it ended on. Messages taken but not sent go back on their queue.
 */
export async function runLane(w: LaneHost, t: LaneTarget, maxMessages: number, guard: LaneGuard): Promise<void> {
  const startedAt = new Date().toISOString();
  // RENDER_AHEAD messages are rendered ahead (on the render threads), and up to two wait in the
  // session behind the one on the wire, so the next envelope can always leave with the current
  // data (RFC 2920 pipelining: one round trip per message) and no session waits for a signature.
  const ahead: Taken[] = [];
  const inSession: Promise<void>[] = [];
  let taken = 0;
  const refill = async () => {
    while (ahead.length < RENDER_AHEAD && taken < maxMessages) {
      const next = await takeJob(w, t.q);
      if (!next) return;
      // A transactional message taken behind marketing ones rendered ahead goes before them: it
      // would otherwise wait for RENDER_AHEAD of them on this session.
      const after = ahead.findIndex((x) => x.job.priority > next.job.priority);
      if (after >= 0) ahead.splice(after, 0, next);
      else ahead.push(next);
      taken++;
    }
  };
  /** Taken but not sent: back to the head of their queue, unless not built (then recorded as failed). */
  const putBack = async (to: DomainQueue) => {
    for (const x of ahead.splice(0).reverse()) if (await x.rendered) to.jobs.unshift(x.job);
  };
  // Rendering starts while the connection is made: servers pause before their greeting on
  // purpose (smtp-server 100 ms, Postfix's postscreen seconds) to catch clients that talk early.
  const [conn] = await Promise.all([
    connectRoute(t.route, {
      ehloName: w.o.ehloName,
      ...(w.o.timeouts ? { timeouts: w.o.timeouts } : {}),
      ...(t.q.source ? { localAddress: t.q.source } : {}),
    }),
    refill(),
  ]);
  if (!conn.ok) {
    const { q, route } = t;
    // A greeting can carry a rule's code too (Yahoo answers 421 [TSS04] before EHLO).
    void w.o.pacing?.observe(route.site, route.profile, q.source ?? '', replyText(conn.failure));
    // Nobody answers: every waiting message of this domain is deferred with that failure.
    const attempt = attemptRecord(startedAt, conn.failure, conn.host, conn.address, route);
    for (const x of ahead.splice(0)) if (await x.rendered) w.defer(x.job, attempt, conn.failure.response);
    for (const job of q.jobs.drain()) w.defer(job, attempt, conn.failure.response);
    return;
  }
  const { session, host, address } = conn.opened;
  const at: SessionEnd = { host, address, route: t.route };
  const turn: Turn = { sent: 0, since: Date.now() };
  const moveTo = (to: LaneTarget) => {
    w.handover.move(t, guard.bucket, to);
    turn.sent = 0;
    turn.since = Date.now();
  };
  try {
    for (;;) {
      await refill();
      if (!session.alive || guard.lost) break;
      if (ahead.length === 0) {
        // Nothing more for this destination: another one this host serves may use the session.
        const to = taken < maxMessages && w.isRunning() ? w.handover.carryOn(t, guard.bucket, at) : null;
        if (!to) break;
        moveTo(to);
        continue;
      }
      // Another destination of the site has no session: this one may end for it, or go on to it.
      const handOver = w.handover.handOver(t, guard.bucket, (ahead[0] as Taken).job.priority, turn, at);
      if (handOver) {
        await putBack(t.q);
        if (handOver === 'end') break;
        moveTo(handOver);
        continue;
      }
      const { q, route } = t;
      const current = ahead.shift() as Taken;
      const rendered = await current.rendered;
      if (!rendered) continue;
      // Checked again here: rendering and the previous send may have taken the margin.
      if (!w.isRunning() || leaseEnding(w, current.job)) {
        await w.release([current.job]);
        continue;
      }
      // Pacing (docs/pacing.md): the site x address rate limits and suspensions, all nodes.
      const waitUntil = await paced(w, q, current.job, route);
      if (waitUntil !== null) {
        if (w.o.pacing?.isSuspended(route.site, q.source ?? null)) {
          // Suspended: nothing more on this session. With a source address the queue goes back
          // to pump(), which moves it off the address (IP pools); else it all waits, unsent.
          const rest = [current.job, ...ahead.splice(0).map((x) => x.job)];
          if (q.source && w.o.sources) for (const j of rest.reverse()) q.jobs.unshift(j);
          else await w.release([...rest, ...q.jobs.drain()], waitUntil);
          break;
        }
        await w.release([current.job], waitUntil);
        continue;
      }
      inSession.push(sendOne(w, q, current.job, rendered, session, host, address, route));
      turn.sent++;
      if (inSession.length >= 3) await inSession.shift();
    }
  } finally {
    await Promise.all(inSession);
    // Taken but not sent (the session ended): back to the queue for another lane.
    await putBack(t.q);
    await session.close();
  }
}

/** The next job worth sending, with its rendering started; jobs near their lease end are released. */
async function takeJob(w: LaneHost, q: DomainQueue): Promise<Taken | null> {
  for (;;) {
    const job = q.jobs.shift();
    if (!job) return null;
    // Never send on a lease about to run out: another worker may already own the message.
    if (leaseEnding(w, job) || !w.isRunning()) {
      await w.release([job]);
      continue;
    }
    return { job, rendered: render(w, job) };
  }
}

/**
 * True when the job's lease ends within the safety margin. The end is the one the claim wrote
 * (locked_until), not claimedAtMs + leaseMs: the lease starts before the claim query runs, so
 * a slow claim would otherwise eat the margin (test/crash saw double sends under load).
 */
function leaseEnding(w: LaneHost, job: Job): boolean {
  const end = Date.parse(job.msg.locked_until ?? '') || job.claimedAtMs + w.o.leaseMs;
  return Date.now() > end - Math.min(30_000, w.o.leaseMs / 4);
}

/** Builds and signs a message; a message that cannot be built fails (null). */
async function render(w: LaneHost, job: Job): Promise<RenderedMessage | null> {
  try {
    const { id, content, raw, options, fromDomain } = job.tx;
    const key = await w.o.signingKey(job.msg.tenant_id, fromDomain ?? '');
    const verpToken = w.o.verp.sign(job.msg.id);
    const rendered = await w.o.renderer.render({
      msg: job.msg,
      tx: { id, content, raw, options, fromDomain },
      key,
      verpToken,
      bounceHost: w.o.bounceHost,
    });
    if (w.o.metrics) observeRender(w.o.metrics, rendered);
    return rendered;
  } catch (err) {
    // The template language's failures (RenderError, also as a render thread's plain Error)
    // are the tenant's content or data: that message fails with the reason, the others go on.
    const text = err instanceof Error ? err.message : String(err);
    const ours = text.startsWith(RENDER_FAILED);
    if (ours) w.o.logger.info({ message: job.msg.id, reason: text.slice(0, 500) }, 'message render failed');
    else w.o.logger.error({ err, message: job.msg.id }, 'message could not be rendered');
    w.complete({
      msg: job.msg,
      mailType: job.tx.mailType,
      tags: job.tx.tags,
      kind: 'failed',
      attempt: null,
      reason: ours ? text.slice(0, 500) : `${RENDER_FAILED}message could not be built`,
    });
    return null;
  }
}

async function sendOne(
  w: LaneHost,
  q: DomainQueue,
  job: Job,
  rendered: RenderedMessage,
  session: SmtpSession,
  host: string,
  address: string | null,
  route: Route,
) {
  const startedAt = new Date().toISOString();
  const result = await session.send({
    envelopeFrom: rendered.envelopeFrom,
    recipients: [job.msg.recipient],
    raw: rendered.raw,
  });
  if (!result.ok && result.notSent) {
    // The connection ended before this message's data: not an attempt, another lane takes it.
    q.jobs.unshift(job);
    return;
  }
  if (!result.ok) void w.o.pacing?.observe(route.site, route.profile, q.source ?? '', replyText(result));
  const attempt = attemptRecord(startedAt, result, host, address, route);
  w.complete(outcomeOf(contextOf(job), result, attempt, Date.now()));
}

/**
 * May `job` go now under its site's limits? null = yes; else when to try it again (epoch ms).
 * A wait of a second or so is spent here, keeping the session; longer ones put it back.
 */
async function paced(w: LaneHost, q: DomainQueue, job: Job, route: Route): Promise<number | null> {
  const pacing = w.o.pacing;
  if (!pacing || route.relay) return null;
  const target = { site: route.site, profile: route.profile, source: q.source ?? '', tenant: job.msg.tenant_id };
  for (;;) {
    const until = await pacing.acquire(target, route.limits);
    if (until === null) return null;
    const wait = until - Date.now();
    if (wait > 1500 || !w.isRunning() || pacing.isSuspended(route.site, q.source ?? null)) return until;
    await new Promise((r) => setTimeout(r, Math.max(10, wait)));
  }
}
