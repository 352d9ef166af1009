import type { ConnectionSlots } from '../pacing/connection-slots.ts';
import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import type { MessagesTable } from '../../db/schema.ts';
import type { MailMetrics } from '../../metrics/mail-metrics.ts';
import type { VerpSigner } from '../outcomes/verp.ts';
import type { SourcePicker } from '../ip-pools/source-picker.ts';
import type { PacingService } from '../pacing/pacing.service.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import type { OutcomeContext } from './attempt-outcome.ts';
import type { Route, RoutingOptions, routeFor } from './destination.ts';
import type { FairQueue } from './fair-queue.ts';
import type { Renderer } from './render/render-pool.ts';
import type { RenderedMessage, SigningKeyLookup, TransmissionForDelivery } from './render/renderer.ts';
import type { SmtpTimeouts } from './smtp/smtp-client.ts';

/**
 * The delivery worker's options and the shapes its parts share (worker.ts claims and sorts
 * messages into queues, lane.ts drains a queue over one SMTP session). Kept apart so both files
 * read the same definitions without importing each other.
 */
export interface DeliveryWorkerOptions {
  workerId: string;
  database: Database;
  suppressions: SuppressionsService;
  logger: Logger;
  routing: RoutingOptions;
  /**
   * Connection slots per destination site, chosen by the container: leases in the database where
   * nodes share it (PostgreSQL), counts in memory where one node owns it (SQLite).
   */
  slots: ConnectionSlots;
  signingKey: SigningKeyLookup;
  /** Tracking base URL and token key (docs/tracking.md); null = no tracking, no List-Unsubscribe. */
  tracking?: { base: string; key: Uint8Array } | null;
  /** Signs the VERP token of each message's envelope sender (src/modules/outcomes/verp.ts). */
  verp: VerpSigner;
  /** POSTYARD_BOUNCE_HOST: the return-path domain of mail whose From domain has no signing key. */
  bounceHost: string;
  ehloName: string;
  /** Messages claimed per query; default DEFAULT_DELIVERY_CLAIM_BATCH (50). */
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

export type ResolvedWorkerOptions = Required<Omit<DeliveryWorkerOptions, 'timeouts'>> & {
  timeouts?: Partial<SmtpTimeouts>;
};

export interface Job {
  /** The message's tenant and 0 transactional / 1 marketing: its place in a FairQueue. */
  tenant: string;
  priority: number;
  msg: MessagesTable;
  tx: TransmissionForDelivery & { mailType: string; tags: string[]; createdAtMs: number };
  claimedAtMs: number;
}

/** A job taken off a domain queue with its rendering under way. */
export interface Taken {
  job: Job;
  rendered: Promise<RenderedMessage | null>;
}

/** Messages each SMTP session keeps rendered (or rendering) ahead of the one it sends. */
export const RENDER_AHEAD = 8;

export interface DomainQueue {
  jobs: FairQueue<Job>;
  lanes: number;
  route: Promise<Awaited<ReturnType<typeof routeFor>>> | null;
  /** The route it resolved last (slot-handover.ts: may another destination's session carry its mail?). */
  resolved?: Route;
  /** The local address its sessions bind (IP pools); null = the host's default route. */
  source?: string | null;
  /**
   * Set for a tenant with pacing overrides: its mail has its own queue and sessions, so its
   * max_connections and messages_per_connection apply (docs/pacing.md).
   */
  tenant?: string;
  /** Lanes are being opened (slots asked for): one round at a time (worker.ts openLanes). */
  opening?: boolean;
  /** A slot request again soon: the site's slots were all held by other nodes. */
  retry?: NodeJS.Timeout | undefined;
  /** Since when it has asked in vain for a slot that other nodes hold (pacing/slot-wait.ts). */
  slotWaitSince?: number | undefined;
}

export const contextOf = (job: Job): OutcomeContext => ({
  msg: job.msg,
  mailType: job.tx.mailType,
  tags: job.tx.tags,
  createdAtMs: job.tx.createdAtMs,
});
