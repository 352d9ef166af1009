import type { MailMetrics } from '../../metrics/mail-metrics.ts';
import type { Job } from './jobs.ts';
import type { WebhookConfig } from './registry.ts';

export interface DispatcherOptions {
  /** Lease holder written into claimed units. */
  nodeId: string;
  retryDelaysMs?: readonly number[];
  /** Relative jitter on retry delays (0.1 = +-10 %). */
  jitter?: number;
  /** In-flight POSTs per webhook with the single policy (a failing webhook gets 1). */
  perWebhookConcurrency?: number;
  /** In-flight batches per webhook with the batch policy. */
  batchConcurrency?: number;
  /** In-flight POSTs of this node over all webhooks. */
  globalConcurrency?: number;
  fanoutBatch?: number;
  fanoutIntervalMs?: number;
  /** How often a webhook with nothing due looks again (new events wake it at once). */
  idlePollMs?: number;
  flushIntervalMs?: number;
  /** Claim lease: longer than the 10 s timeout plus a flush. */
  lockMs?: number;
  autoDisableAfterMs?: number;
  /** How long stop() waits for in-flight POSTs. */
  stopTimeoutMs?: number;
  /** POST outcomes and delivery lag (src/metrics/mail-metrics.ts); none when not given. */
  metrics?: MailMetrics | null;
}

/** Per-webhook runtime state of a dispatcher (one lane per enabled webhook). */
export interface Lane {
  cfg: WebhookConfig;
  inflight: number;
  /** Jobs claimed and built but not started (normally empty: claims are sized to free slots). */
  ready: Job[];
  polling: boolean;
  nextPollAt: number;
  pausedUntil: number;
  failing: boolean;
  /** 410 seen or disabled: send nothing more until the registry says otherwise. */
  gone: boolean;
}

/**
 * A healthy single-policy lane claims up to this many times its POST slots ahead, so a claim
 * (a database commit) serves dozens of events rather than a handful; what is not started when
 * the lane starts failing is given back at once (releaseReady).
 */
export const CLAIM_AHEAD = 4;

/** Statuses that say "the endpoint is in trouble", not "this event is unwelcome": pause the lane. */
export const BACK_OFF_STATUSES = new Set([408, 429, 502, 503, 504]);
