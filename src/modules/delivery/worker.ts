import { DEFAULT_DELIVERY_CLAIM_BATCH } from '../../config/schema.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { destinationOf, queueKey } from '../ip-pools/source-picker.ts';
import { type ConnectionSlots, LocalSlots } from '../pacing/connection-slots.ts';
import { SLOT_RETRY_MS, SlotWaits } from '../pacing/slot-wait.ts';
import { deferral, routeFailureOutcome } from './attempt-outcome.ts';
import { type Route, routeFamilies, routeFor } from './destination.ts';
import { FairClaimer } from './fair-claim.ts';
import { FairQueue } from './fair-queue.ts';
import { IdleWait } from './idle-wait.ts';
import { type LaneHost, runLane } from './lane.ts';
import { type MoveOffHost, moveOff } from './move-off.ts';
import { OutcomeBuffer } from './outcome-buffer.ts';
import type { Outcome } from '../outcomes/outcomes.ts';
import { releaseMessages } from './queue.repo.ts';
import { TenantShares } from './tenant-shares.ts';
import { type LaneTarget, SlotHandover } from './slot-handover.ts';
import { inlineRenderer } from './render/render-pool.ts';
import { TransmissionCache } from './transmission-cache.ts';
import {
  contextOf,
  type DeliveryWorkerOptions,
  type DomainQueue,
  type Job,
  type ResolvedWorkerOptions,
} from './worker-types.ts';

export type { DeliveryWorkerOptions } from './worker-types.ts';

/**
 * The delivery worker: claims due messages with a lease, sorts them into ready queues per
 * recipient domain, and drains each queue over reused SMTP sessions ("lanes") within the
 * per-site connection limits of the shaping table. Outcomes are recorded in batches.
 */
export class DeliveryWorker implements LaneHost, MoveOffHost {
  private running = false;
  private loop: Promise<void> | null = null;
  private inflight = 0;
  private readonly queues = new Map<string, DomainQueue>();
  /** Connection slots (the options' slots: see DeliveryWorkerOptions). */
  private readonly slots: ConnectionSlots;
  private readonly relaySlots = new LocalSlots();
  private readonly transmissions: TransmissionCache;
  private readonly outcomes: OutcomeBuffer;
  private readonly lanes = new Set<Promise<void>>();
  /** Turns among tenants (fair-claim.ts); a random start so nodes do not contend for one head. */
  private readonly claimer = new FairClaimer(Math.random().toString(16).slice(2));
  /** Claimed-but-unfinished messages per tenant: none may hold more than its share (tenant-shares.ts). */
  private readonly shares: TenantShares;
  /**
   * The messages this worker holds (claimed, not yet released or recorded), by id. A lease that
   * ran out while its message was still being sent makes it due again, and our own next claim
   * may take it back under the same holder id: that claim only renews the held copy's lease
   * (withoutHeld), or the message would be sent, and reported, twice.
   */
  private readonly held = new Map<string, MessagesTable>();
  /** Queues waiting for slots other nodes hold: when their messages go back (slot-wait.ts). */
  private readonly slotWaits: SlotWaits;
  /** Sessions and slots handed between the destinations of one site (slot-handover.ts). */
  readonly handover = new SlotHandover((key, q) => {
    if (this.queues.get(key) === q) this.dropQueue(key, q);
  });
  /** The wait between claims that found nothing (nudged by accepts in this process). */
  private readonly idle = new IdleWait();
  readonly o: ResolvedWorkerOptions;

  constructor(opts: DeliveryWorkerOptions) {
    this.o = {
      batchSize: DEFAULT_DELIVERY_CLAIM_BATCH,
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
    this.slots = this.o.slots;
    this.slotWaits = new SlotWaits(this.o.pollMs);
    this.shares = new TenantShares(this.o.maxInflight);
    this.transmissions = new TransmissionCache(() => this.o.database.db, this.o.tracking);
    this.outcomes = new OutcomeBuffer({
      database: this.o.database,
      suppressions: this.o.suppressions,
      workerId: this.o.workerId,
      logger: this.o.logger,
      metrics: this.o.metrics ?? undefined,
      written: (batch) => {
        this.inflight -= batch.length;
        for (const o of batch) this.held.delete(o.msg.id);
      },
    });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    // The first claim waits for the tenants' pacing overrides: a message claimed before they are
    // loaded would share a session with other tenants' mail its override keeps apart.
    const ready = this.o.pacing?.start() ?? Promise.resolve();
    this.loop = ready.then(() => this.run());
  }

  /** Resolves when the render threads are up (the node listens only after this). */
  async warm(): Promise<void> {
    await this.o.renderer.warm?.();
  }

  /** Stops claiming, lets lanes finish their current message, releases the rest, flushes. */
  async stop(): Promise<void> {
    this.running = false;
    this.idle.wake();
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
    await this.slots.close();
    await this.flush();
    await this.o.renderer.close();
    await this.o.routing.mtaSts?.close();
  }

  isRunning(): boolean {
    return this.running;
  }

  /** Mail was accepted in this process: an idle worker claims within NUDGE_GAP_MS (idle-wait.ts). */
  notify(): void {
    this.idle.nudge();
  }

  private async run(): Promise<void> {
    while (this.running) {
      let claimed: MessagesTable[] = [];
      if (this.inflight < this.o.maxInflight) {
        try {
          this.idle.claiming();
          const n = Math.min(this.o.batchSize, this.o.maxInflight - this.inflight);
          claimed = this.withoutHeld(
            await this.claimer.claim(this.o.database, this.o.workerId, n, this.o.leaseMs, this.skippedTenants()),
          );
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
        this.shares.claimed(claimed.map((m) => m.tenant_id));
        await this.dispatch(claimed);
        // A turn between claims: on SQLite (synchronous driver) sandbox mail, which completes at
        // dispatch, made this loop one stretch of 0.8-1.1 s for 10,000 messages.
        await new Promise<void>((resolve) => setImmediate(resolve));
        continue;
      }
      await this.idle.sleep(this.o.pollMs);
    }
  }

  /** The claimed rows this worker did not hold yet; a held one gets the new lease end (see held). */
  private withoutHeld(claimed: MessagesTable[]): MessagesTable[] {
    const fresh: MessagesTable[] = [];
    for (const m of claimed) {
      const mine = this.held.get(m.id);
      if (mine) mine.locked_until = m.locked_until;
      else fresh.push(m);
    }
    return fresh;
  }

  async dispatch(claimed: MessagesTable[]): Promise<void> {
    for (const msg of claimed) this.held.set(msg.id, msg);
    await this.transmissions.prefetch(claimed);
    const now = Date.now();
    for (const msg of claimed) {
      const tx = await this.transmissions.of(msg);
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
      if (r.ok) q.resolved = r.route;
      if (!r.ok) {
        for (const job of q.jobs.drain()) this.routeFailure(job, r);
        return;
      }
      // Off an address suspended for the site, or of a family the MX hosts lack (IP pools).
      const to = q.source && this.o.sources ? { site: r.route.site, families: routeFamilies(r.route) } : null;
      if (to && q.source && !this.o.sources?.usableFor(to, q.source)) {
        void moveOff(this, q.jobs.drain(), to, q.source, r.route);
        return;
      }
      void this.openLanes(domain, q, r.route);
    });
  }

  /**
   * Starts lanes for `q` up to its site's connection limit, each holding a connection slot of its
   * site x source address (x tenant scope) for as long as its session lives: one slot taken per
   * session, not per message. On PostgreSQL the slots are leases shared by every node
   * (src/modules/pacing/connection-slots.ts); one opening round per queue at a time, so a burst
   * of new messages does not send a burst of slot requests.
   */
  private async openLanes(domain: string, q: DomainQueue, route: Route): Promise<void> {
    if (q.opening) return;
    q.opening = true;
    try {
      for (;;) {
        const lim = this.queueLimits(q, route);
        const wanted = Math.min(lim.limits.maxConnections, Math.ceil(q.jobs.length / 10));
        if (q.lanes >= wanted || q.jobs.length === 0 || !this.running) return;
        // Another destination of the site has no session here: the next free slot is its.
        if (this.handover.leavesSlot(lim.slot, q)) {
          this.handover.waits(lim.slot, domain, q);
          return;
        }
        // A relay is the operator's own MTA: its 10 sessions stay per node, as before (docs/pacing.md).
        const slots = route.relay ? this.relaySlots : this.slots;
        const lease = await slots.acquire(lim.slot, lim.limits.maxConnections);
        if (!lease) {
          this.handover.waits(lim.slot, domain, q);
          // Held by other nodes: none of this node's lanes ending will say when one is free. With
          // none here and none coming for a while, the messages go back for a node that has one.
          if (slots.heldHere(lim.slot) === 0 && q.lanes === 0) {
            const now = Date.now();
            q.slotWaitSince ??= now;
            if (now - q.slotWaitSince >= this.slotWaits.patience(lim.slot, now)) {
              await this.handBack(q, lim.slot);
              // Claimed meanwhile: they wait their own turn.
              if (q.jobs.length > 0) this.retryLater(domain, q);
              return;
            }
          }
          if (slots.heldHere(lim.slot) < lim.limits.maxConnections) this.retryLater(domain, q);
          return;
        }
        q.slotWaitSince = undefined;
        this.slotWaits.acquired(lim.slot);
        this.handover.forget(q);
        if (!this.running) {
          slots.release(lease);
          return;
        }
        q.lanes++;
        // The lane may go on to other destinations its session reaches (slot-handover.ts): it
        // ends on `target`.
        const target: LaneTarget = { key: domain, q, route };
        const lane = runLane(this, target, lim.limits.maxMessagesPerConnection, lease).finally(() => {
          const { key: endedKey, q: ended } = target;
          ended.lanes--;
          // Connection limits are per site x source address (docs/ip-pools.md).
          slots.release(lease);
          this.lanes.delete(lane);
          if (ended.jobs.length > 0) this.pump(endedKey, ended);
          else if (ended.lanes === 0 && !ended.opening) this.dropQueue(endedKey, ended);
          // A slot came free: the destinations that asked for one of this site in vain (the
          // starving first), and queues of other domains waiting without a lane, which may be on
          // this site (they are pumped only by new messages otherwise, and would wait for them).
          for (const [key, other] of this.handover.waitersOf(lease.bucket))
            if (other !== ended && this.queues.get(key) === other) this.pump(key, other);
          for (const [key, other] of this.queues)
            if (other !== ended && other.lanes === 0 && other.jobs.length > 0) this.pump(key, other);
        });
        this.lanes.add(lane);
      }
    } finally {
      q.opening = false;
      // A lane that ended while slots were asked for left the queue in place: drop it if empty.
      if (q.lanes === 0 && q.jobs.length === 0 && this.queues.get(domain) === q) this.dropQueue(domain, q);
    }
  }

  private dropQueue(domain: string, q: DomainQueue): void {
    this.queues.delete(domain);
    this.handover.forget(q);
  }

  /** Asks for a slot again in SLOT_RETRY_MS (the slots of the queue's site are other nodes'). */
  private retryLater(domain: string, q: DomainQueue): void {
    if (q.retry) return;
    q.retry = setTimeout(() => {
      q.retry = undefined;
      if (this.running && this.queues.get(domain) === q && q.jobs.length > 0) this.pump(domain, q);
    }, SLOT_RETRY_MS);
    q.retry.unref();
  }

  /**
   * Every slot of `bucket` is other nodes' and none came free within the queue's patience: its
   * messages go back, due now and no attempt counted, for the nodes sending there (slot-wait.ts).
   */
  private async handBack(q: DomainQueue, bucket: string): Promise<void> {
    const jobs = q.jobs.drain();
    q.slotWaitSince = undefined;
    this.slotWaits.handedBack(bucket, new Set(jobs.map((j) => j.tenant)));
    this.o.logger.info(
      { bucket, messages: jobs.length },
      'pacing: connection slots held by other nodes; messages handed back to the queue',
    );
    await this.release(jobs);
  }

  private routeFailure(job: Job, r: Parameters<typeof routeFailureOutcome>[1]) {
    this.complete(routeFailureOutcome(contextOf(job), r, Date.now()));
  }

  defer(job: Job, attempt: Outcome['attempt'], diagnostic: string) {
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
   * Puts claimed-but-unsent messages back, due at once (any worker can take them) or at `atMs`
   * (pacing: a full rate bucket or a suspension), without counting an attempt.
   */
  async release(jobs: Job[], atMs?: number): Promise<void> {
    const ids = jobs.map((j) => j.msg.id);
    await releaseMessages(this.o.database, this.o.workerId, ids, atMs).catch((err) =>
      this.o.logger.error({ err }, 'releasing messages failed'),
    );
    this.forget(jobs.map((j) => j.msg));
  }

  /** Messages that went back to the queue: no longer in flight or held here. */
  forget(msgs: readonly MessagesTable[]): void {
    this.inflight -= msgs.length;
    for (const m of msgs) {
      this.shares.settled(m.tenant_id);
      this.held.delete(m.id);
    }
  }

  /**
   * The tenants the claim passes over: those holding their share of this worker (tenant-shares.ts),
   * and for a moment those whose mail this node handed back to nodes holding slots.
   */
  private skippedTenants(): Set<string> {
    return this.slotWaits.addSkipped(this.shares.full());
  }

  complete(o: Outcome): void {
    this.o.sources?.observe(o.kind, o.msg);
    this.shares.settled(o.msg.tenant_id);
    this.outcomes.add(o);
  }

  /** Writes buffered outcomes now. */
  flush(): Promise<void> {
    return this.outcomes.flush();
  }
}
