import { BoundedCache } from '../../lib/bounded-cache.ts';
import type { MailMetrics } from '../../metrics/mail-metrics.ts';
import type { Outcome } from '../outcomes/outcomes.ts';
import type { RenderedMessage } from './render/renderer.ts';
import { SITE_RULES, siteFor } from './shaping.ts';

/** The delivery worker's part of the mail metrics (src/metrics/mail-metrics.ts). */

const bySite = new Set(['relay', ...SITE_RULES.map((r) => r.site)]);

/**
 * The site label: the shaping table's named sites and `relay`; any other destination is `other`
 * (a label per receiving domain would grow without bound), `none` when no SMTP server was reached.
 */
export function siteLabel(site: string | null | undefined): string {
  if (!site) return 'none';
  return bySite.has(site) ? site : 'other';
}

/** MX host -> site label: the suffix rules run once per host, not once per message. */
const hostSites = new BoundedCache<string, string>(4096);
function siteOfHost(host: string): string {
  let label = hostSites.get(host);
  if (label === undefined) {
    label = siteLabel(siteFor(host).site);
    hostSites.set(host, label);
  }
  return label;
}

/**
 * One delivery outcome: its attempt by outcome and site (from the MX host the attempt reached;
 * `none` without one: no route, render failure, sandbox), and for a delivery the time since the
 * message was accepted (sandbox deliveries are not deliveries).
 */
export function countOutcome(m: MailMetrics, o: Outcome, nowMs = Date.now()): void {
  const host = o.attempt?.mxHost;
  m.deliveryAttempts.inc({ outcome: o.kind, site: host ? siteOfHost(host) : 'none' });
  if (o.kind === 'delivered' && !o.sandbox) {
    const accepted = Date.parse(o.msg.created_at);
    if (!Number.isNaN(accepted)) m.acceptToDelivered.observe(Math.max(0, nowMs - accepted) / 1000);
  }
}

/** Render and signing times, measured where the message was built (render thread or inline). */
export function observeRender(m: MailMetrics, r: RenderedMessage): void {
  if (r.renderMs !== undefined) m.renderSeconds.observe(r.renderMs / 1000);
  if (r.dkimMs !== undefined) m.dkimSignSeconds.observe(r.dkimMs / 1000);
}
