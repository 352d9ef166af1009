/**
 * Metrics of the mail path (docs/operations.md "Metrics"), one set per registry: every component
 * of a process that holds the container's registry gets the same counters, so a node reports what
 * its roles do whichever roles it runs. Updating one is a Map lookup and an addition: nothing here
 * touches the database (queue depth is sampled at scrape time, queue-gauges.ts). What counts as
 * one event of each (an outcome, a render, a webhook POST) is its module's to say:
 * delivery/delivery-metrics.ts and webhooks/webhook-metrics.ts.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

export interface MailMetrics {
  /** Claim queries that returned work, and the messages they claimed. */
  claims: Counter;
  claimedMessages: Counter;
  /** Delivery outcomes (with or without an SMTP attempt) by outcome and destination site. */
  deliveryAttempts: Counter<'outcome' | 'site'>;
  /** From the transmission's acceptance to the receiving server's 250 (sandbox excluded). */
  acceptToDelivered: Histogram;
  /** Building and signing one message (template, MIME, DKIM), wherever it ran. */
  renderSeconds: Histogram;
  dkimSignSeconds: Histogram;
  /** SMTP submission: connections opened, and messages by the answer to their DATA. */
  smtpSessions: Counter;
  smtpMessages: Counter<'result'>;
  /** Webhook POSTs by outcome, and for delivered ones how old their oldest event was. */
  webhookAttempts: Counter<'outcome'>;
  webhookLagSeconds: Histogram;
  /** Opens, clicks and unsubscribes recorded from tracking requests. */
  trackingEvents: Counter<'kind'>;
}

const cache = new WeakMap<Registry, MailMetrics>();

// Render and signing are sub-millisecond to tens of ms; delivery can take up to the 72 h schedule.
const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400, 259_200];

export function mailMetrics(registry: Registry): MailMetrics {
  const hit = cache.get(registry);
  if (hit) return hit;
  const registers = [registry];
  const m: MailMetrics = {
    claims: new Counter({
      name: 'postyard_delivery_claims_total',
      help: 'Claim queries of the delivery worker that returned messages',
      registers,
    }),
    claimedMessages: new Counter({
      name: 'postyard_delivery_claimed_messages_total',
      help: 'Messages claimed by the delivery worker',
      registers,
    }),
    deliveryAttempts: new Counter({
      name: 'postyard_delivery_attempts_total',
      help: 'Delivery outcomes by outcome (delivered, deferred, bounced, failed) and destination site',
      labelNames: ['outcome', 'site'] as const,
      registers,
    }),
    acceptToDelivered: new Histogram({
      name: 'postyard_delivery_accept_to_delivered_seconds',
      help: 'Time from acceptance of the transmission to delivery of the message',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    renderSeconds: new Histogram({
      name: 'postyard_render_duration_seconds',
      help: 'Time to build and sign one outgoing message (render thread or main thread)',
      buckets: FAST_BUCKETS,
      registers,
    }),
    dkimSignSeconds: new Histogram({
      name: 'postyard_dkim_sign_duration_seconds',
      help: 'Time to DKIM-sign one outgoing message',
      buckets: FAST_BUCKETS,
      registers,
    }),
    smtpSessions: new Counter({
      name: 'postyard_smtp_sessions_total',
      help: 'SMTP submission connections opened',
      registers,
    }),
    smtpMessages: new Counter({
      name: 'postyard_smtp_messages_total',
      help: 'Messages submitted over SMTP by result (accepted, refused)',
      labelNames: ['result'] as const,
      registers,
    }),
    webhookAttempts: new Counter({
      name: 'postyard_webhook_attempts_total',
      help: 'Webhook POSTs by outcome (success, http_error, network_error)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    webhookLagSeconds: new Histogram({
      name: 'postyard_webhook_delivery_lag_seconds',
      help: 'Age of the oldest event of a webhook POST when the receiver accepted it',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    trackingEvents: new Counter({
      name: 'postyard_tracking_events_total',
      help: 'Tracking requests recorded, by kind (open, click, unsubscribe)',
      labelNames: ['kind'] as const,
      registers,
    }),
  };
  // Series with a known label set exist from the start (at 0), so rate() and alerts see them.
  for (const result of ['accepted', 'refused']) m.smtpMessages.inc({ result }, 0);
  for (const outcome of ['success', 'http_error', 'network_error']) m.webhookAttempts.inc({ outcome }, 0);
  for (const kind of ['open', 'click', 'unsubscribe']) m.trackingEvents.inc({ kind }, 0);
  cache.set(registry, m);
  return m;
}
