import { loadPacingData, type PacingData, type SiteLimits } from '../pacing/pacing-data.ts';

/**
 * Traffic shaping as data (docs/pacing.md): per destination-site limits from config/pacing.yaml
 * (or the operator's POSTYARD_PACING_FILE). A "site" is derived from the MX host names, not the
 * recipient domain, so every Google Workspace domain counts against Google's limits (KumoMTA's
 * model). Known sites are matched by MX host suffix, first in file order; every other
 * destination takes the `default` profile's limits but is counted on its own, by its MX host's
 * last two labels (mx1.example.net and mx2.example.net are one site, example.net).
 */
export type { SiteLimits };

/** The shipped file, read once; the worker passes the operator's file in RoutingOptions.shaping. */
export const SHIPPED_SHAPING: PacingData = loadPacingData(null);

/** Suffix -> site of the shipped file (metrics label known sites by it). */
export const SITE_RULES: readonly { suffix: string; site: string; limits: SiteLimits }[] =
  SHIPPED_SHAPING.sites.flatMap((s) => s.mx.map((suffix) => ({ suffix, site: s.name, limits: s.limits })));

export interface SiteMatch {
  /** What limits and suspensions are counted under: the profile name, or example.net. */
  site: string;
  /** The profile whose limits apply (`default` for unknown hosts); tenant overrides name it. */
  profile: string;
  limits: SiteLimits;
}

/** The site and its limits for a destination whose best MX host is `mxHost`. */
export function siteFor(mxHost: string, data: PacingData = SHIPPED_SHAPING): SiteMatch {
  const host = `.${mxHost.toLowerCase().replace(/\.$/, '')}`;
  for (const s of data.sites) {
    if (s.mx.some((suffix) => host.endsWith(suffix))) return { site: s.name, profile: s.name, limits: s.limits };
  }
  const fallback = data.sites.at(-1) as PacingData['sites'][number];
  const labels = host.slice(1).split('.');
  return { site: labels.slice(-2).join('.'), profile: fallback.name, limits: fallback.limits };
}
