/**
 * Traffic shaping as data: per destination-site limits with defaults. A "site" is derived from
 * the MX host names, not the recipient domain, so every Google Workspace domain counts against
 * Google's limits (KumoMTA's model). Operators extend SITE_RULES; first matching suffix wins.
 */
export interface SiteLimits {
  /** Concurrent SMTP connections from this node to the site. */
  maxConnections: number;
  /** Messages sent over one connection before it is recycled. */
  maxMessagesPerConnection: number;
}

/**
 * Unknown sites: 5 connections (polite), 1,000 messages per connection. Reusing a connection is
 * what receivers prefer (fewer handshakes, and many pause before their greeting on purpose:
 * smtp-server 100 ms, Postfix's postscreen seconds); KumoMTA's default is 1,024 deliveries per
 * connection and Postfix limits reuse by time, not count. Sites known to want less are below.
 */
export const DEFAULT_LIMITS: SiteLimits = { maxConnections: 5, maxMessagesPerConnection: 1000 };

export const SITE_RULES: readonly { suffix: string; site: string; limits: SiteLimits }[] = [
  { suffix: '.google.com', site: 'google', limits: { maxConnections: 10, maxMessagesPerConnection: 100 } },
  { suffix: '.googlemail.com', site: 'google', limits: { maxConnections: 10, maxMessagesPerConnection: 100 } },
  { suffix: '.outlook.com', site: 'microsoft', limits: { maxConnections: 10, maxMessagesPerConnection: 50 } },
  { suffix: '.yahoodns.net', site: 'yahoo', limits: { maxConnections: 5, maxMessagesPerConnection: 20 } },
  { suffix: '.icloud.com', site: 'apple', limits: { maxConnections: 5, maxMessagesPerConnection: 50 } },
];

/** The site and its limits for a destination whose best MX host is `mxHost`. */
export function siteFor(mxHost: string, overrides: Partial<SiteLimits> = {}): { site: string; limits: SiteLimits } {
  const host = `.${mxHost.toLowerCase().replace(/\.$/, '')}`;
  for (const r of SITE_RULES)
    if (host.endsWith(r.suffix)) return { site: r.site, limits: { ...r.limits, ...overrides } };
  // Unknown sites: group by the MX host's last two labels (mx1.example.net, mx2.example.net).
  const labels = host.slice(1).split('.');
  return { site: labels.slice(-2).join('.'), limits: { ...DEFAULT_LIMITS, ...overrides } };
}
