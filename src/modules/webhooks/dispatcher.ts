import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import { isoAt } from '../../lib/clock.ts';
import { eventJson } from '../events/events.repo.ts';
import { EventBodyCache } from './event-cache.ts';
import { FanOutLoop } from './fanout-loop.ts';
import { OutcomeBuffer } from './outcome-buffer.ts';
import {
  buildJobs,
  type ClaimedWork,
  finishUnit,
  type Job,
  jobBody,
  pickBatch,
  RETRY_SCHEDULE_MS,
  type RetryPolicy,
  settleJob,
  unsend,
  unstarted,
} from './jobs.ts';
import {
  type ClaimedUnit,
  claimUnits,
  loadEvents,
  peekDue,
  releaseClaims,
  releaseUnits,
  SINGLE_UNIT_EVENTS,
} from './queue.repo.ts';
import { BACK_OFF_STATUSES, CLAIM_AHEAD, type DispatcherOptions, type Lane } from './lane.ts';
import type { RegistrySnapshot, WebhookRegistry } from './registry.ts';
import type { WebhookSender } from './sender.ts';
import { countWebhookPost } from './webhook-metrics.ts';

export type { DispatcherOptions };
export { RETRY_SCHEDULE_MS };
const FIVE_DAYS_MS = 5 * 86_400_000;

/**
 * The webhook dispatcher (worker role). Fan-out moves committed events from the outbox into
 * per-webhook delivery units; each webhook then has a lane that claims its due units and POSTs
 * them, so a slow or dead endpoint only ever occupies its own lane: at most
 * `perWebhookConcurrency` POSTs (1 while failing, paused after back-off answers), within a
 * global bound. Outcomes are buffered and written in one transaction every `flushIntervalMs`.
 */
export class WebhookDispatcher {
  private readonly o: Required<Omit<DispatcherOptions, 'nodeId'>> & { nodeId: string };
  private readonly retry: RetryPolicy;
  private readonly lanes = new Map<string, Lane>();
  private snapshot: RegistrySnapshot | null = null;
  private readonly inflight = new Set<Promise<void>>();
  private globalInflight = 0;
  private readonly outcomes: OutcomeBuffer;
  private timers: NodeJS.Timeout[] = [];
  private readonly fanout: FanOutLoop;
  private kickScheduled = false;
  private rr = 0;
  private stopping = false;
  /** JSON of events fanned out here, until their lanes have built the POSTs (event-cache.ts). */
  private readonly bodies = new EventBodyCache();

  constructor(
    private readonly database: Database,
    private readonly registry: WebhookRegistry,
    private readonly sender: WebhookSender,
    private readonly logger: Logger,
    opts: DispatcherOptions,
  ) {
    this.o = {
      retryDelaysMs: RETRY_SCHEDULE_MS,
      jitter: 0.1,
      perWebhookConcurrency: 16,
      batchConcurrency: 4,
      globalConcurrency: 512,
      fanoutBatch: 1000,
      fanoutIntervalMs: 100,
      idlePollMs: 1000,
      flushIntervalMs: 50,
      lockMs: 120_000,
      autoDisableAfterMs: FIVE_DAYS_MS,
      // In-flight POSTs end by their own 10 s timeout; leave the rest of the 10 s shutdown budget
      // to writing their outcomes.
      stopTimeoutMs: 8_500,
      metrics: null,
      ...opts,
    };
    this.retry = { delaysMs: this.o.retryDelaysMs, jitter: this.o.jitter };
    this.fanout = new FanOutLoop(
      database,
      registry,
      logger,
      this.bodies,
      { batch: this.o.fanoutBatch, intervalMs: this.o.fanoutIntervalMs },
      {
        onSnapshot: (snap) => this.syncLanes(snap),
        isSending: (id, now) => {
          const lane = this.lanes.get(id);
          return !!lane && !lane.failing && !lane.gone && lane.pausedUntil <= now;
        },
        onQueued: (queued) => {
          for (const id of queued.keys()) {
            const lane = this.lanes.get(id);
            if (lane) lane.nextPollAt = 0;
          }
          this.kick();
        },
      },
    );
    this.outcomes = new OutcomeBuffer(database, logger, this.o.autoDisableAfterMs, (disabled) => {
      for (const d of disabled) {
        const lane = this.lanes.get(d.id);
        if (lane) lane.gone = true;
      }
      this.registry.invalidate();
    });
  }

  start(): void {
    this.stopping = false;
    this.timers.push(
      setInterval(() => this.tick(), 20),
      setInterval(() => void this.outcomes.flush(), this.o.flushIntervalMs),
    );
    for (const t of this.timers) t.unref();
    this.fanout.start();
  }

  /** Stops claiming, waits for in-flight POSTs (stopTimeoutMs at most), writes outcomes, releases claims. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.fanout.stop();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.inflight]),
      new Promise((r) => {
        timer = setTimeout(r, this.o.stopTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    for (let i = 0; i < 3 && this.outcomes.busy; i++) await this.outcomes.flush();
    await releaseClaims(this.database.db, this.o.nodeId, isoAt(Date.now())).catch((err) =>
      this.logger.warn({ err }, 'webhook dispatcher: could not release claims'),
    );
    this.bodies.clear();
  }

  // ---- fan-out -------------------------------------------------------------------------------

  /** One fan-out round; also keeps the lanes in step with the registry. Returns rows consumed. */
  fanoutOnce(): Promise<number> {
    return this.fanout.once();
  }

  private syncLanes(snap: RegistrySnapshot) {
    if (snap === this.snapshot) return;
    this.snapshot = snap;
    for (const [id, lane] of this.lanes) {
      if (!snap.byId.has(id)) {
        lane.gone = true; // disabled or deleted: its queue is gone too, drop what is not sent
        lane.ready = [];
        this.lanes.delete(id);
      }
    }
    for (const cfg of snap.byId.values()) {
      const lane = this.lanes.get(cfg.id);
      if (!lane) {
        this.lanes.set(cfg.id, {
          cfg,
          inflight: 0,
          ready: [],
          polling: false,
          nextPollAt: 0,
          pausedUntil: 0,
          failing: false,
          gone: false,
        });
      } else if (lane.cfg.version !== cfg.version) {
        // Changed by its owner (new URL, re-enabled, ...): start afresh.
        Object.assign(lane, { cfg, nextPollAt: 0, pausedUntil: 0, failing: false, gone: false });
      }
    }
  }

  // ---- lanes ---------------------------------------------------------------------------------

  private kick() {
    if (this.kickScheduled) return;
    this.kickScheduled = true;
    setImmediate(() => {
      this.kickScheduled = false;
      this.tick();
    });
  }

  private capOf(lane: Lane): number {
    if (lane.failing) return 1;
    return lane.cfg.policy === 'batch' ? this.o.batchConcurrency : this.o.perWebhookConcurrency;
  }

  /** POSTs a lane may hold claimed (in flight plus ready). */
  private claimTarget(lane: Lane): number {
    const cap = this.capOf(lane);
    return lane.cfg.policy === 'single' && !lane.failing ? cap * CLAIM_AHEAD : cap;
  }

  private tick() {
    if (this.stopping) return;
    const now = Date.now();
    const lanes = [...this.lanes.values()];
    // Rotate the starting lane so that, when the global bound bites, no webhook always goes last.
    this.rr = (this.rr + 1) % Math.max(1, lanes.length);
    for (let i = 0; i < lanes.length; i++) {
      const lane = lanes[(i + this.rr) % lanes.length] as Lane;
      if (lane.gone || now < lane.pausedUntil) continue;
      this.pump(lane);
      if (this.globalInflight >= this.o.globalConcurrency) break;
      if (lane.polling || now < lane.nextPollAt) continue;
      const target = this.claimTarget(lane);
      const busy = lane.inflight + lane.ready.length;
      // Single: refill once half the target is used, so claims come in chunks, not one per event.
      if (lane.cfg.policy === 'batch' ? busy >= target : busy > Math.floor(target / 2)) continue;
      lane.polling = true;
      this.poll(lane)
        .catch((err) => {
          this.logger.error({ err, webhook: lane.cfg.id }, 'webhook lane poll failed');
          lane.nextPollAt = Date.now() + this.o.idlePollMs;
        })
        .finally(() => {
          lane.polling = false;
        });
    }
  }

  /** Claims what the lane has room for and starts it. */
  private async poll(lane: Lane): Promise<void> {
    const now = Date.now();
    const cfg = lane.cfg;
    const lease = { now: isoAt(now), until: isoAt(now + this.o.lockMs), holder: this.o.nodeId };
    let claimed: ClaimedUnit[];
    if (cfg.policy === 'batch') {
      // One poll fills every free batch slot: the lane's DB round trips are serialized, so
      // claiming one batch per poll would cap a busy webhook at one batch per round trip chain.
      const room = Math.max(1, this.capOf(lane) - lane.inflight - lane.ready.length);
      const maxEvents = room * cfg.batchMaxSize;
      // Units normally hold a whole batch; 25 per batch slot covers backlogs of small units too.
      const due = await peekDue(this.database, cfg.id, Math.min(maxEvents, room * 25, 1000), lease.now);
      const pick = pickBatch(due, cfg, maxEvents, now);
      if ('waitUntil' in pick) {
        lane.nextPollAt = Math.min(pick.waitUntil, now + this.o.idlePollMs);
        return;
      }
      const ids = pick.ids;
      claimed = await claimUnits(this.database, cfg.id, { ids }, lease);
    } else {
      const room = this.claimTarget(lane) - lane.inflight - lane.ready.length;
      if (room <= 0 || this.globalInflight >= this.o.globalConcurrency) return;
      // Units hold up to SINGLE_UNIT_EVENTS events (fewer after a retry or a split).
      claimed = await claimUnits(this.database, cfg.id, { limit: Math.ceil(room / SINGLE_UNIT_EVENTS) }, lease);
    }
    if (claimed.length === 0) {
      lane.nextPollAt = now + this.o.idlePollMs;
      return;
    }
    lane.nextPollAt = 0; // more may be due: look again as soon as there is room
    const work: ClaimedWork[] = claimed.map((u) => ({
      id: u.id,
      tenantId: u.tenant_id,
      oldestEventAt: u.oldest_event_at,
      attempts: u.attempts,
      eventIds: JSON.parse(u.event_ids) as string[],
    }));
    const { jobs, empty } = buildJobs(work, await this.bodiesOf(work), cfg.policy, cfg.batchMaxSize);
    for (const unit of empty) this.outcomes.record([finishUnit(cfg.id, unit, this.retry, now)]);
    for (const job of jobs) job.leaseUntil = now + this.o.lockMs;
    lane.ready.push(...jobs);
    this.pump(lane);
  }

  /**
   * Hands back `jobs` (claimed, not started) when the lane stops sending them (it is failing or
   * paused, or their lease is running out): units nothing was sent of are released at once; the
   * unstarted events of units partly in flight go back with the unit's outcome. Either way they
   * are due again at once, for this or another node, with no attempt counted. Returns what must
   * stay in the ready queue (nothing).
   */
  private releaseReady(lane: Lane, jobs: Job[]): Job[] {
    const { release, keep } = unstarted(jobs);
    if (release.length) {
      releaseUnits(
        this.database,
        lane.cfg.id,
        this.o.nodeId,
        release.map((u) => u.id),
        isoAt(Date.now()),
      ).catch((err) => this.logger.warn({ err, webhook: lane.cfg.id }, 'webhook units not released; their lease will'));
    }
    // Units partly in flight: their unstarted events go back unsent, written with the unit's
    // outcome (split off when others of it failed), so nothing waits on a stopped lane.
    const now = Date.now();
    for (const unit of unsend(keep)) this.outcomes.record([finishUnit(lane.cfg.id, unit, this.retry, now)]);
    return [];
  }

  /** Event JSON for claimed work: from the fan-out cache, the rest read from the database. */
  private async bodiesOf(work: readonly ClaimedWork[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const missing: string[] = [];
    for (const w of work) {
      for (const id of w.eventIds) {
        const json = this.bodies.take(id);
        if (json === undefined) missing.push(id);
        else out.set(id, json);
      }
    }
    this.fanout.wake();
    if (missing.length) for (const ev of await loadEvents(this.database, missing)) out.set(ev.id, eventJson(ev));
    return out;
  }

  private pump(lane: Lane) {
    if (lane.gone) lane.ready = [];
    // Never start a POST that could outlive the claim (10 s timeout plus writing the outcome).
    const first = lane.ready[0];
    if (first?.leaseUntil && first.leaseUntil - Math.min(15_000, this.o.lockMs / 2) < Date.now()) {
      lane.ready = this.releaseReady(lane, lane.ready);
    }
    while (
      lane.ready.length &&
      lane.inflight < this.capOf(lane) &&
      this.globalInflight < this.o.globalConcurrency &&
      Date.now() >= lane.pausedUntil
    ) {
      this.launch(lane, lane.ready.shift() as Job);
    }
  }

  private launch(lane: Lane, job: Job) {
    lane.inflight++;
    this.globalInflight++;
    const p: Promise<void> = this.deliver(lane, job)
      .catch((err) => this.logger.error({ err, webhook: lane.cfg.id }, 'webhook delivery crashed'))
      .finally(() => {
        lane.inflight--;
        this.globalInflight--;
        this.inflight.delete(p);
        this.kick();
      });
    this.inflight.add(p);
  }

  private async deliver(lane: Lane, job: Job): Promise<void> {
    const cfg = lane.cfg;
    const { msgId, body, batchId } = jobBody(job, cfg.policy);
    const res = await this.sender.send({ url: cfg.url, msgId, body, keys: cfg.keysAt(Date.now()) });
    const at = Date.now();
    if (this.o.metrics) countWebhookPost(this.o.metrics, job, res, at);
    if (res.ok) lane.failing = false;
    else {
      lane.failing = true;
      if (lane.ready.length) lane.ready = this.releaseReady(lane, lane.ready);
      if (res.gone) lane.gone = true;
      if (res.retryAfterMs !== null || res.statusCode === null || BACK_OFF_STATUSES.has(res.statusCode)) {
        const pause =
          res.retryAfterMs !== null
            ? Math.min(Math.max(res.retryAfterMs, 1000), 86_400_000)
            : (this.o.retryDelaysMs[0] ?? 0);
        lane.pausedUntil = Math.max(lane.pausedUntil, at + pause);
      }
    }
    this.outcomes.record(
      settleJob(job, res, { webhookId: cfg.id, tenantId: cfg.tenantId, batchId, policy: this.retry, at }),
    );
  }
}
