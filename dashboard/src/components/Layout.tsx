import { type ReactNode, useEffect, useState } from 'react';
import { Link } from '../lib/router.tsx';
import type { Session } from '../lib/types.ts';

const NAV: { to: string; label: string; group?: string }[] = [
  { to: '/', label: 'Overview' },
  { to: '/activity', label: 'Activity' },
  { to: '/suppressions', label: 'Suppressions' },
  { to: '/domains', label: 'Sending domains' },
  { to: '/settings/api-keys', label: 'API keys', group: 'Settings' },
  { to: '/settings/smtp', label: 'SMTP credentials', group: 'Settings' },
  { to: '/settings/webhooks', label: 'Webhooks', group: 'Settings' },
  { to: '/settings/account', label: 'Account', group: 'Settings' },
];

function isCurrent(path: string, to: string): boolean {
  if (to === '/activity') return path === '/activity' || path.startsWith('/messages/');
  return path === to;
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
  const link = (n: (typeof NAV)[number]) => (
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
