/**
 * The dashboard's pages, in one list read by both sides: the server (pages.ts serves each path,
 * sign-in-cookies.ts allows each as the way back after sign-in) and the single-page app
 * (dashboard/src: its router, its navigation, and App.tsx, whose page table must name a component
 * for every `page` here or the dashboard's typecheck fails). Adding a page is one entry here plus
 * its component. Plain data only: the browser bundle imports this file too.
 */
export interface DashboardPageEntry {
  /** The URL path; `:name` segments are parameters (`/messages/:id`). */
  path: string;
  /** The page's name in the app's page table. */
  page: string;
  /** In the navigation, under this label (and group); pages without one are reached by links. */
  nav?: { label: string; group?: 'Settings' };
  /** For a page not in the navigation: the entry it belongs to (shown as current). */
  navParent?: string;
  /** Reachable signed out (the sign-in page); never a way back after sign-in. */
  signedOut?: true;
}

export const DASHBOARD_PAGES = [
  { path: '/', page: 'overview', nav: { label: 'Overview' } },
  { path: '/login', page: 'login', signedOut: true },
  { path: '/activity', page: 'activity', nav: { label: 'Activity' } },
  { path: '/messages/:id', page: 'message', navParent: '/activity' },
  { path: '/suppressions', page: 'suppressions', nav: { label: 'Suppressions' } },
  { path: '/templates', page: 'templates', nav: { label: 'Templates' } },
  { path: '/templates/:id', page: 'template', navParent: '/templates' },
  { path: '/domains', page: 'domains', nav: { label: 'Sending domains' } },
  { path: '/ip-pools', page: 'ip-pools', nav: { label: 'IP pools' } },
  { path: '/ip-pools/:id', page: 'ip-pool', navParent: '/ip-pools' },
  { path: '/warmup', page: 'warmup', nav: { label: 'Warmup' } },
  { path: '/pacing', page: 'pacing', nav: { label: 'Pacing' } },
  { path: '/settings/api-keys', page: 'api-keys', nav: { label: 'API keys', group: 'Settings' } },
  { path: '/settings/smtp', page: 'smtp', nav: { label: 'SMTP credentials', group: 'Settings' } },
  { path: '/settings/webhooks', page: 'webhooks', nav: { label: 'Webhooks', group: 'Settings' } },
  { path: '/settings/account', page: 'account', nav: { label: 'Account', group: 'Settings' } },
] as const satisfies readonly DashboardPageEntry[];

export type PageName = (typeof DASHBOARD_PAGES)[number]['page'];

/** A regular expression for `path`, each `:parameter` matching one segment of `segment`. */
export function pathPattern(path: string, segment: string): RegExp {
  return new RegExp(`^${path.replace(/:[A-Za-z_]+/g, `(${segment})`)}$`);
}
