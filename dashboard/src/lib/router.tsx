import { type AnchorHTMLAttributes, type MouseEvent, useSyncExternalStore } from 'react';
import { DASHBOARD_PAGES, type PageName, pathPattern } from '../../../src/modules/dashboard/page-list.ts';

/** A tiny history-API router over the fixed page list (src/modules/dashboard/page-list.ts). */
const listeners = new Set<() => void>();

function notify() {
  for (const l of listeners) l();
}

if (typeof window !== 'undefined') window.addEventListener('popstate', notify);

export function navigate(to: string, opts: { replace?: boolean } = {}) {
  if (to === window.location.pathname + window.location.search) return;
  if (opts.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  window.scrollTo(0, 0);
  notify();
}

function subscribe(l: () => void) {
  listeners.add(l);
  return () => listeners.delete(l);
}

const snapshot = () => window.location.pathname + window.location.search;

export interface Location {
  path: string;
  search: URLSearchParams;
  href: string;
}

export function useLocation(): Location {
  const href = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(href, window.location.origin);
  return { path: url.pathname.replace(/\/+$/, '') || '/', search: url.searchParams, href };
}

/** Only our own pages are valid targets after sign-in (no open redirects). */
export function safeNext(raw: string | null): string {
  if (!raw?.startsWith('/') || raw.startsWith('//') || raw.includes('\\')) return '/';
  return raw;
}

/** The page at a path, with its path parameters (decoded), or not-found. */
export type Route = { page: PageName; params: Record<string, string> } | { page: 'not-found' };

const MATCHERS = DASHBOARD_PAGES.map((p) => ({
  page: p.page,
  names: [...p.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1] ?? ''),
  re: pathPattern(p.path, '[^/]+'),
}));

export function matchRoute(path: string): Route {
  for (const m of MATCHERS) {
    const found = m.re.exec(path);
    if (!found) continue;
    const params: Record<string, string> = {};
    m.names.forEach((name, i) => {
      params[name] = decodeURIComponent(found[i + 1] ?? '');
    });
    return { page: m.page, params };
  }
  return { page: 'not-found' };
}

/** An <a> that navigates without a reload (modified clicks still open new tabs). */
export function Link({ to, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { to: string }) {
  const handle = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return <a href={to} onClick={handle} {...rest} />;
}
