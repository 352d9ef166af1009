import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { RENDER_FAILED } from '../../lib/template-language.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { attemptRecord, deferral, type OutcomeContext, outcomeOf, routeFailureOutcome } from './attempt-outcome.ts';
import { connectRoute, type Route, type RoutingOptions, routeFamilies, routeFor, SiteSlots } from './destination.ts';
import type { Outcome } from './outcomes.ts';
import { loadTransmission, releaseMessages } from './queue.repo.ts';
import { FairClaimer } from './fair-claim.ts';
import { FairQueue } from './fair-queue.ts';
import { type PacingService, replyText } from '../pacing/pacing.service.ts';
import { OutcomeBuffer } from './outcome-buffer.ts';
import { inlineRenderer, type Renderer } from './render/render-pool.ts';
import {
  forDelivery,
  type RenderedMessage,
  type SigningKeyLookup,
  type TransmissionForDelivery,
} from './render/renderer.ts';
import type { SmtpTimeouts } from './smtp/smtp-client.ts';
import { trackingPlan } from '../tracking/render-plan.ts';
import type { VerpSigner } from '../inbound/verp.ts';
import { type MailMetrics, observeRender } from '../../metrics/mail-metrics.ts';
import { type Destination, destinationOf, queueKey, type SourcePicker } from '../ip-pools/source-picker.ts';

export interface DeliveryWorkerOptions {
  workerId: string;
  database: Database;
  suppressions: SuppressionsService;
  logger: Logger;
  routing: RoutingOptions;
  signingKey: SigningKeyLookup;
  /** Tracking base URL and token key (docs/tracking.md); null = no tracking, no List-Unsubscribe. */
  tracking?: { base: string; key: Uint8Array } | null;
  /** Signs the VERP token of each message's envelope sender (src/modules/inbound/verp.ts). */
  verp: VerpSigner;
  /** POSTYARD_BOUNCE_HOST: the return-path domain of mail whose From domain has no signing key. */
  bounceHost: string;
  ehloName: string;
  /** Messages claimed per query; default 200. */
  batchSize?: number;
  /** Claim lease; a crashed worker's messages come back after it. Default 300 s. */
  leaseMs?: number;
  /** Idle poll interval; default 250 ms. */
  pollMs?: number;
  /** Claimed-but-unfinished messages held in memory at most; default 2000. */
  maxInflight?: number;
  timeouts?: Partial<SmtpTimeouts>;
  /** Where messages are built and signed (a thread pool by default); closed by stop(). */
  renderer?: Renderer;
  /** Claims, outcomes and render times (src/metrics/mail-metrics.ts); none when not given. */
  metrics?: MailMetrics | null;
  /** Site limits across nodes, automation rules and suspensions (src/modules/pacing); null = none. */
  pacing?: PacingService | null;
  /** Source addresses: IP pools, warmup, suspensions (src/modules/ip-pools); null = default route. */
  sources?: SourcePicker | null;
}

const contextOf = (job: Job): OutcomeContext => ({
  msg: job.msg,
  mailType: job.tx.mailType,
  tags: job.tx.tags,
  createdAtMs: job.tx.createdAtMs,
});

interface Job {
  /** The message's tenant and 0 transactional / 1 marketing: its place in a FairQueue. */
  tenant: string;
  priority: number;
  msg: MessagesTable;
  tx: TransmissionForDelivery & { mailType: string; tags: string[]; createdAtMs: number };
  claimedAtMs: number;
}

/** A job taken off a domain queue with its rendering under way. */
interface Taken {
  job: Job;
  rendered: Promise<RenderedMessage | null>;
}

/** The part of maxInflight one tenant may hold, leaving room to claim other tenants' mail. */
const TENANT_SHARE = 0.75;

/** Messages each SMTP session keeps rendered (or rendering) ahead of the one it sends. */
const RENDER_AHEAD = 8;

interface DomainQueue {
  jobs: FairQueue<Job>;
  lanes: number;
  route: Promise<Awaited<ReturnType<typeof routeFor>>> | null;
  /** The local address its sessions bind (IP pools); null = the host's default route. */
  source?: string | null;
  /**
   * Set for a tenant with pacing overrides: its mail has its own queue and sessions, so its
   * max_connections and messages_per_connection apply (docs/pacing.md).
   */
  tenant?: string;
}

/**
 * The delivery worker: claims due messages with a lease, sorts them into ready queues per
 * recipient domain, and drains each queue over reused SMTP sessions ("lanes") within the
 * per-site connection limits of the shaping table. Outcomes are recorded in batches.
 */
export class DeliveryWorker {
  private running = false;
  private loop: Promise<void> | null = null;
  private inflight = 0;
  private readonly queues = new Map<string, DomainQueue>();
  private readonly slots = new SiteSlots();
  private readonly txCache = new BoundedCache<string, Job['tx']>(500);
  private readonly outcomes: OutcomeBuffer;
  private readonly lanes = new Set<Promise<void>>();
  /** Turns among tenants (fair-claim.ts); a random start so nodes do not contend for one head. */
  private readonly claimer = new FairClaimer(Math.random().toString(16).slice(2));
  /** Claimed-but-unfinished messages per tenant: none may hold more than TENANT_SHARE of maxInflight. */
  private readonly byTenant = new Map<string, number>();
  private wake: (() => void) | null = null;
  readonly o: Required<Omit<DeliveryWorkerOptions, 'timeouts'>> & { timeouts?: Partial<SmtpTimeouts> };

  constructor(opts: DeliveryWorkerOptions) {
    this.o = {
      batchSize: 200,
      leaseMs: 300_000,
      pollMs: 250,
      maxInflight: 2000,
      renderer: inlineRenderer,
      metrics: null,
      tracking: null,
      sources: null,
      pacing: null,
      ...opts,
    };
    this.outcomes = new OutcomeBuffer({
      database: this.o.database,
      suppressions: this.o.suppressions,
      workerId: this.o.workerId,
      logger: this.o.logger,
      metrics: this.o.metrics ?? undefined,
      written: (n) => {
        this.inflight -= n;
      },
    });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.o.pacing?.start();
    this.loop = this.run();
  }

  /** Stops claiming, lets lanes finish their current message, releases the rest, flushes. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    for (const q of this.queues.values()) {
      const jobs = q.jobs.drain();
      if (jobs.length) await this.release(jobs);
    }
    await Promise.allSettled([...this.lanes]);
    // Lanes that ended hand back what they had taken but not sent (rendered ahead, or waiting
    // behind a connection that died): release those too, so no message waits for its lease.
    for (const q of this.queues.values()) {
      const jobs = q.jobs.drain();
      if (jobs.length) await this.release(jobs);
    }
    await this.flush();
    await this.o.renderer.close();
    await this.o.routing.mtaSts?.close();
  }

  /** Nudges an idle worker (after an accept in the same process). */
  notify(): void {
    this.wake?.();
  }

  private async run(): Promise<void> {
    while (this.running) {
      let claimed: MessagesTable[] = [];
      if (this.inflight < this.o.maxInflight) {
        try {
          const n = Math.min(this.o.batchSize, this.o.maxInflight - this.inflight);
          claimed = await this.claimer.claim(this.o.database, this.o.workerId, n, this.o.leaseMs, this.fullTenants());
          // Warmup-capped messages are put back due when a slot opens (not counted as attempts).
          if (this.o.sources) claimed = await this.o.sources.assign(claimed);
        } catch (err) {
          this.o.logger.error({ err }, 'claiming messages failed');
        }
      }
      if (claimed.length) {
        this.o.metrics?.claims.inc();
        this.o.metrics?.claimedMessages.inc(claimed.length);
        this.inflight += claimed.length;
        for (const m of claimed) this.byTenant.set(m.tenant_id, (this.byTenant.get(m.tenant_id) ?? 0) + 1);
        await this.dispatch(claimed);
        continue;
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.o.pollMs);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  private async transmission(msg: MessagesTable): Promise<Job['tx'] | null> {
    const hit = this.txCache.get(msg.transmission_id);
    if (hit) return hit;
    const row = await loadTransmission(this.o.database.db, msg.tenant_id, msg.transmission_id);
    if (!row) return null;
    const base = forDelivery(row);
    const tags = JSON.parse(row.tags) as string[];
    const tracking = this.o.tracking
      ? trackingPlan(this.o.tracking, {
          tenant_id: row.tenant_id,
          mail_type: row.mail_type,
          tags,
          options: base.options,
        })
      : null;
    const tx = {
      ...base,
      options: { ...base.options, tracking },
      mailType: row.mail_type,
      tags,
      createdAtMs: Date.parse(row.created_at),
    };
    this.txCache.set(row.id, tx);
    return tx;
  }

  private async dispatch(claimed: MessagesTable[]): Promise<void> {
    const now = Date.now();
    for (const msg of claimed) {
      const tx = await this.transmission(msg);
      if (!tx) {
        this.complete({
          msg,
          mailType: 'transactional',
          tags: [],
          kind: 'failed',
          attempt: null,
          reason: 'transmission not found',
        });
        continue;
      }
      if (tx.options.sandbox) {
        this.complete({ msg, mailType: tx.mailType, tags: tx.tags, kind: 'delivered', attempt: null, sandbox: true });
        continue;
      }
      const own = this.o.pacing?.hasOverrides(msg.tenant_id) ? msg.tenant_id : null;
      const key = `${queueKey(this.o.routing.relay ? '*relay*' : msg.recipient_domain, msg.source_address)}${own ? ` ${own}` : ''}`;
      let q = this.queues.get(key);
      if (!q) {
        q = {
          jobs: new FairQueue<Job>(),
          lanes: 0,
          route: null,
          source: msg.source_address ?? null,
          ...(own ? { tenant: own } : {}),
        };
        this.queues.set(key, q);
      }
      q.jobs.push({ tenant: msg.tenant_id, priority: tx.mailType === 'marketing' ? 1 : 0, msg, tx, claimedAtMs: now });
      this.pump(key, q);
    }
  }

  /** Starts lanes for a domain queue up to its site's connection limit. */
  private pump(domain: string, q: DomainQueue): void {
    q.route ??= routeFor(destinationOf(domain), this.o.routing).finally(() => {
      // Re-resolve for the next batch (the resolver caches by TTL).
      setTimeout(() => {
        q.route = null;
      }, 1000).unref();
    });
    void q.route.then((r) => {
      if (!r.ok) {
        for (const job of q.jobs.drain()) this.routeFailure(job, r);
        return;
      }
      // Off an address suspended for the site, or of a family the MX hosts lack (IP pools).
      const to = q.source && this.o.sources ? { site: r.route.site, families: routeFamilies(r.route) } : null;
      if (to && q.source && !this.o.sources?.usableFor(to, q.source)) {
        void this.moveOff(q.jobs.drain(), to, q.source, r.route);
        return;
      }
      const lim = this.queueLimits(q, r.route);
      const wanted = Math.min(lim.limits.maxConnections, Math.ceil(q.jobs.length / 10));
      while (q.lanes < wanted && q.jobs.length > 0 && this.slots.tryAcquire(lim.slot, lim.limits.maxConnections)) {
        q.lanes++;
        const lane = this.lane(q, r.route).finally(() => {
          q.lanes--;
          // Connection limits are per site x source address (docs/ip-pools.md).
          this.slots.release(lim.slot);
          this.lanes.delete(lane);
          if (q.jobs.length > 0) this.pump(domain, q);
          else if (q.lanes === 0) this.queues.delete(domain);
          // A slot came free: queues of other domains waiting without a lane may be on this site
          // (they are pumped only by new messages otherwise, and would wait for them).
          for (const [key, other] of this.queues)
            if (other !== q && other.lanes === 0 && other.jobs.length > 0) this.pump(key, other);
        });
        this.lanes.add(lane);
      }
    });
  }

  private routeFailure(job: Job, r: Parameters<typeof routeFailureOutcome>[1]) {
    this.complete(routeFailureOutcome(contextOf(job), r, Date.now()));
  }

  /** One SMTP session draining a domain queue. */
  private async lane(q: DomainQueue, route: Route): Promise<void> {
    const startedAt = new Date().toISOString();
    // RENDER_AHEAD messages are rendered ahead (on the render threads), and up to two wait in the
    // session behind the one on the wire, so the next envelope can always leave with the current
    // data (RFC 2920 pipelining: one round trip per message) and no session waits for a signature.
    const max = this.queueLimits(q, route).limits.maxMessagesPerConnection;
    const ahead: Taken[] = [];
    const inSession: Promise<void>[] = [];
    let taken = 0;
    const refill = async () => {
      while (ahead.length < RENDER_AHEAD && taken < max) {
        const t = await this.takeJob(q);
        if (!t) return;
        ahead.push(t);
        taken++;
      }
    };
    // Rendering starts while the connection is made: servers pause before their greeting on
    // purpose (smtp-server 100 ms, Postfix's postscreen seconds) to catch clients that talk early.
    const [conn] = await Promise.all([
      connectRoute(route, {
        ehloName: this.o.ehloName,
        ...(this.o.timeouts ? { timeouts: this.o.timeouts } : {}),
        ...(q.source ? { localAddress: q.source } : {}),
      }),
      refill(),
    ]);
    if (!conn.ok) {
      // A greeting can carry a rule's code too (Yahoo answers 421 [TSS04] before EHLO).
      void this.o.pacing?.observe(route.site, route.profile, q.source ?? '', replyText(conn.failure));
      // Nobody answers: every waiting message of this domain is deferred with that failure.
      const attempt = attemptRecord(startedAt, conn.failure, conn.host, conn.address, route);
      for (const t of ahead.splice(0)) if (await t.rendered) this.defer(t.job, attempt, conn.failure.response);
      for (const job of q.jobs.drain()) this.defer(job, attempt, conn.failure.response);
      return;
    }
    const { session, host, address } = conn.opened;
    try {
      for (;;) {
        await refill();
        if (ahead.length === 0 || !session.alive) break;
        const current = ahead.shift() as Taken;
        const rendered = await current.rendered;
        if (!rendered) continue;
        // Checked again here: rendering and the previous send may have taken the margin.
        if (!this.running || this.leaseEnding(current.job)) {
          await this.release([current.job]);
          continue;
        }
        // Pacing (docs/pacing.md): the site x address rate limits and suspensions, all nodes.
        const waitUntil = await this.paced(q, current.job, route);
        if (waitUntil !== null) {
          if (this.o.pacing?.isSuspended(route.site, q.source ?? null)) {
            // Suspended: nothing more on this session. With a source address the queue goes back
            // to pump(), which moves it off the address (IP pools); else it all waits, unsent.
            const rest = [current.job, ...ahead.splice(0).map((t) => t.job)];
            if (q.source && this.o.sources) for (const j of rest.reverse()) q.jobs.unshift(j);
            else await this.release([...rest, ...q.jobs.drain()], waitUntil);
            break;
          }
          await this.release([current.job], waitUntil);
          continue;
        }
        inSession.push(this.sendOne(q, current.job, rendered, session, host, address, route));
        if (inSession.length >= 3) await inSession.shift();
      }
    } finally {
      await Promise.all(inSession);
      // Taken but not sent (the session ended): back to the queue for another lane, unless it
      // could not be built (then it is already recorded as failed).
      for (const t of ahead.reverse()) if (await t.rendered) q.jobs.unshift(t.job);
      await session.close();
    }
  }

  /** The next job worth sending, with its rendering started; jobs near their lease end are released. */
  private async takeJob(q: DomainQueue): Promise<Taken | null> {
    for (;;) {
      const job = q.jobs.shift();
      if (!job) return null;
      // Never send on a lease about to run out: another worker may already own the message.
      if (this.leaseEnding(job) || !this.running) {
        await this.release([job]);
        continue;
      }
      const rendered = this.render(job);
      return { job, rendered };
    }
  }

  /**
   * True when the job's lease ends within the safety margin. The end is the one the claim wrote
   * (locked_until), not claimedAtMs + leaseMs: the lease starts before the claim query runs, so
   * a slow claim would otherwise eat the margin (test/crash saw double sends under load).
   */
  private leaseEnding(job: Job): boolean {
    const end = Date.parse(job.msg.locked_until ?? '') || job.claimedAtMs + this.o.leaseMs;
    return Date.now() > end - Math.min(30_000, this.o.leaseMs / 4);
  }

  /** Builds and signs a message; a message that cannot be built fails (null). */
  private async render(job: Job): Promise<RenderedMessage | null> {
    try {
      const { id, content, raw, options, fromDomain } = job.tx;
      const key = await this.o.signingKey(job.msg.tenant_id, fromDomain ?? '');
      const verpToken = this.o.verp.sign(job.msg.id);
      const rendered = await this.o.renderer.render({
        msg: job.msg,
        tx: { id, content, raw, options, fromDomain },
        key,
        verpToken,
        bounceHost: this.o.bounceHost,
      });
      if (this.o.metrics) observeRender(this.o.metrics, rendered);
      return rendered;
    } catch (err) {
      // The template language's failures (RenderError, also as a render thread's plain Error)
      // are the tenant's content or data: that message fails with the reason, the others go on.
      const text = err instanceof Error ? err.message : String(err);
      const ours = text.startsWith(RENDER_FAILED);
      if (ours) this.o.logger.info({ message: job.msg.id, reason: text.slice(0, 500) }, 'message render failed');
      else this.o.logger.error({ err, message: job.msg.id }, 'message could not be rendered');
      this.complete({
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

  private async sendOne(
    q: DomainQueue,
    job: Job,
    rendered: RenderedMessage,
    session: import('./smtp/smtp-client.ts').SmtpSession,
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
    if (!result.ok) void this.o.pacing?.observe(route.site, route.profile, q.source ?? '', replyText(result));
    const attempt = attemptRecord(startedAt, result, host, address, route);
    this.complete(outcomeOf(contextOf(job), result, attempt, Date.now()));
  }

  private defer(job: Job, attempt: Outcome['attempt'], diagnostic: string) {
    this.complete(deferral(contextOf(job), attempt, diagnostic, Date.now()));
  }

  /**
   * A queue's connection limits and the key its sessions count under: the site's, per site x
   * source address; for a tenant's own queue, its override where it has one for the site (and its
   * own count of sessions, as its rate limits have their own allowance).
   */
  private queueLimits(q: DomainQueue, route: Route): { limits: Route['limits']; slot: string } {
    const base = queueKey(route.site, q.source);
    if (!q.tenant || !this.o.pacing) return { limits: route.limits, slot: base };
    const { limits, scope } = this.o.pacing.limitsFor(q.tenant, route.profile, route.limits);
    return { limits, slot: scope ? `${base}|${scope}` : base };
  }

  /**
   * May `job` go now under its site's limits? null = yes; else when to try it again (epoch ms).
   * A wait of a second or so is spent here, keeping the session; longer ones put it back.
   */
  private async paced(q: DomainQueue, job: Job, route: Route): Promise<number | null> {
    const pacing = this.o.pacing;
    if (!pacing || route.relay) return null;
    const target = { site: route.site, profile: route.profile, source: q.source ?? '', tenant: job.msg.tenant_id };
    for (;;) {
      const until = await pacing.acquire(target, route.limits);
      if (until === null) return null;
      const wait = until - Date.now();
      if (wait > 1500 || !this.running || pacing.isSuspended(route.site, q.source ?? null)) return until;
      await new Promise((r) => setTimeout(r, Math.max(10, wait)));
    }
  }

  /**
   * Puts claimed-but-unsent messages back, due at once (any worker can take them) or at `atMs`
   * (pacing: a full rate bucket or a suspension), without counting an attempt.
   */
  private async release(jobs: Job[], atMs?: number): Promise<void> {
    const ids = jobs.map((j) => j.msg.id);
    await releaseMessages(this.o.database, this.o.workerId, ids, atMs).catch((err) =>
      this.o.logger.error({ err }, 'releasing messages failed'),
    );
    this.inflight -= jobs.length;
    for (const j of jobs) this.settled(j.msg.tenant_id, 1);
  }

  private settled(tenant: string, n: number): void {
    const left = (this.byTenant.get(tenant) ?? n) - n;
    if (left > 0) this.byTenant.set(tenant, left);
    else this.byTenant.delete(tenant);
  }

  /**
   * Tenants holding their share of this worker's capacity: the claim passes them over, so the
   * rest stays free for the others' mail (one tenant's backlog never fills the worker).
   */
  private fullTenants(): Set<string> {
    const cap = Math.max(1, Math.floor(this.o.maxInflight * TENANT_SHARE));
    const full = new Set<string>();
    for (const [t, n] of this.byTenant) if (n >= cap) full.add(t);
    return full;
  }

  /** Jobs queued on a source address that cannot send to `to`: another address, or back in the queue. */
  private async moveOff(jobs: Job[], to: Destination, from: string, route: Route): Promise<void> {
    if (jobs.length === 0 || !this.o.sources) return;
    const { ready, waiting } = await this.o.sources.moveOff(
      jobs.map((j) => j.msg),
      to,
    );
    this.inflight -= waiting.length;
    for (const m of waiting) this.settled(m.tenant_id, 1);
    // Kept on `from`: no address of theirs reaches the MX hosts' families. Queued again they would
    // come straight back here, so the attempt is deferred with the reason (the retry schedule runs).
    const byId = new Map(jobs.map((j) => [j.msg.id, j]));
    const moved = ready.filter((m) => m.source_address !== from);
    const response = `no address of ${route.hosts.map((h) => h.host).join(', ')} is of the family of the source address ${from}`;
    const failure = {
      ok: false as const,
      permanent: false,
      response,
      tls: false,
      transcript: [],
      stage: 'connect' as const,
    };
    const attempt = attemptRecord(new Date().toISOString(), failure, route.hosts[0]?.host ?? null, null, route);
    for (const m of ready) {
      const job = byId.get(m.id);
      if (m.source_address === from && job) this.defer(job, attempt, response);
    }
    await this.dispatch(moved);
  }

  private complete(o: Outcome): void {
    this.o.sources?.observe(o.kind, o.msg);
    this.settled(o.msg.tenant_id, 1);
    this.outcomes.add(o);
  }

  /** Writes buffered outcomes now. */
  flush(): Promise<void> {
    return this.outcomes.flush();
  }
}
