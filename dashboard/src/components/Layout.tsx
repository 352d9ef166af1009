import { type ReactNode, useEffect, useState } from 'react';
import { DASHBOARD_PAGES, pathPattern } from '../../../src/modules/dashboard/page-list.ts';
import { Link } from '../lib/router.tsx';
import type { Session } from '../lib/types.ts';

type NavEntry = { to: string; label: string; group?: string };

/** The navigation: the pages of page-list.ts that carry a `nav` label, in list order. */
const NAV: NavEntry[] = DASHBOARD_PAGES.flatMap((p) => ('nav' in p ? [{ to: p.path, ...p.nav }] : []));
/** Pages outside the navigation, by the entry shown as current for them (/messages/:id -> /activity). */
const CHILDREN = DASHBOARD_PAGES.flatMap((p) =>
  'navParent' in p ? [{ parent: p.navParent, re: pathPattern(p.path, '[^/]+') }] : [],
);

function isCurrent(path: string, to: string): boolean {
  return path === to || CHILDREN.some((c) => c.parent === to && c.re.test(path));
}

export function Layout({
  session,
  path,
  onSignOut,
  children,
}: {
  session: Session;
  path: string;
  onSignOut: () => void;
  children: ReactNode;
}) {
  const [menuOpen, setMenuOpen] = useState(false);
  // biome-ignore lint/correctness/useExhaustiveDependencies: close the phone menu on every navigation
  useEffect(() => setMenuOpen(false), [path]);
  const main = NAV.filter((n) => !n.group);
  const settings = NAV.filter((n) => n.group === 'Settings');
  const link = (n: NavEntry) => (
    <li key={n.to}>
      <Link to={n.to} aria-current={isCurrent(path, n.to) ? 'page' : undefined}>
        {n.label}
      </Link>
    </li>
  );
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/" className="brand">
          <span className="brand-mark" aria-hidden="true" />
          Postyard
        </Link>
        <span className="tenant" title={`Tenant ${session.tenant.id}`}>
          {session.tenant.name}
        </span>
        <button
          type="button"
          className="btn btn-small menu-toggle"
          aria-expanded={menuOpen}
          aria-controls="sidenav"
          onClick={() => setMenuOpen((o) => !o)}
        >
          Menu
        </button>
        <div className="user">
          <span className="user-email">{session.user.email}</span>
          <button type="button" className="btn btn-small" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <nav id="sidenav" className={`sidenav${menuOpen ? ' open' : ''}`} aria-label="Dashboard">
        <ul>{main.map(link)}</ul>
        <p className="nav-group">Settings</p>
        <ul>{settings.map(link)}</ul>
      </nav>
      <main id="main" className="content" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}
