import { type AnchorHTMLAttributes, type MouseEvent, useSyncExternalStore } from 'react';

/** A tiny history-API router: the page paths are few and fixed (docs/dashboard.md "Pages"). */
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

export type Route =
  | {
      page:
        | 'overview'
        | 'activity'
        | 'api-keys'
        | 'smtp'
        | 'webhooks'
        | 'account'
        | 'suppressions'
        | 'domains'
        | 'login';
    }
  | { page: 'message'; id: string }
  | { page: 'not-found' };

const STATIC: Record<string, Route['page']> = {
  '/': 'overview',
  '/login': 'login',
  '/activity': 'activity',
  '/settings/api-keys': 'api-keys',
  '/settings/smtp': 'smtp',
  '/settings/webhooks': 'webhooks',
  '/settings/account': 'account',
  '/suppressions': 'suppressions',
  '/domains': 'domains',
};

export function matchRoute(path: string): Route {
  const page = STATIC[path];
  if (page && page !== 'message' && page !== 'not-found') return { page };
  const m = /^\/messages\/([^/]+)$/.exec(path);
  if (m?.[1]) return { page: 'message', id: decodeURIComponent(m[1]) };
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
