import { type ReactNode, useCallback, useEffect, useState } from 'react';
import type { PageName } from '../../src/modules/dashboard/page-list.ts';
import { Layout } from './components/Layout.tsx';
import { ErrorBox, Loading } from './components/ui.tsx';
import { api, setCsrfToken, setUnauthorizedHandler } from './lib/api.ts';
import { matchRoute, navigate, safeNext, useLocation } from './lib/router.tsx';
import type { Session, SignedOut } from './lib/types.ts';
import { Account } from './pages/Account.tsx';
import { Activity } from './pages/Activity.tsx';
import { ApiKeys } from './pages/ApiKeys.tsx';
import { Domains } from './pages/Domains.tsx';
import { IpPoolPage, IpPools } from './pages/IpPools.tsx';
import { Login } from './pages/Login.tsx';
import { MessagePage } from './pages/Message.tsx';
import { NotFound } from './pages/NotFound.tsx';
import { Overview } from './pages/Overview.tsx';
import { Smtp } from './pages/Smtp.tsx';
import { Suppressions } from './pages/Suppressions.tsx';
import { TemplateEditor } from './pages/TemplateEditor.tsx';
import { Templates } from './pages/Templates.tsx';
import { Warmup } from './pages/Warmup.tsx';
import { Pacing } from './pages/Pacing.tsx';
import { Webhooks } from './pages/Webhooks.tsx';

interface PageProps {
  session: Session;
  params: Record<string, string>;
  reloadSession: () => Promise<void>;
}

/**
 * The component of every page of src/modules/dashboard/page-list.ts (typed by its names, so a page
 * added there without a component here fails the typecheck). The sign-in page renders outside the
 * signed-in layout, above.
 */
const PAGES: Record<Exclude<PageName, 'login'>, (p: PageProps) => ReactNode> = {
  overview: ({ session }) => <Overview session={session} />,
  activity: () => <Activity />,
  message: ({ params }) => <MessagePage id={params.id ?? ''} />,
  'api-keys': () => <ApiKeys />,
  smtp: ({ session }) => <Smtp session={session} />,
  webhooks: () => <Webhooks />,
  suppressions: () => <Suppressions />,
  domains: () => <Domains />,
  templates: () => <Templates />,
  template: ({ params }) => <TemplateEditor id={params.id ?? ''} />,
  'ip-pools': () => <IpPools />,
  'ip-pool': ({ params }) => <IpPoolPage id={params.id ?? ''} />,
  warmup: () => <Warmup />,
  pacing: () => <Pacing />,
  account: ({ session, reloadSession }) => <Account session={session} onChanged={reloadSession} />,
};

/** Session state: undefined while loading, null when signed out. */
export function App() {
  const loc = useLocation();
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [loadError, setLoadError] = useState<Error | undefined>(undefined);

  const loadSession = useCallback(async () => {
    setLoadError(undefined);
    try {
      const s = await api<Session | SignedOut>('GET', '/session');
      setCsrfToken(s.csrf_token);
      setSession(s.authenticated ? s : null);
    } catch (e) {
      setLoadError(e instanceof Error ? e : new Error(String(e)));
    }
  }, []);

  useEffect(() => {
    void loadSession();
    // A 401 from any call means the session ended: back to sign-in, then back here.
    setUnauthorizedHandler(() => {
      setSession(null);
      void loadSession();
    });
  }, [loadSession]);

  const route = matchRoute(loc.path);
  const signedOutElsewhere = session === null && route.page !== 'login';
  useEffect(() => {
    if (signedOutElsewhere) {
      const next = loc.path === '/' && !loc.search.toString() ? '' : `?next=${encodeURIComponent(loc.href)}`;
      navigate(`/login${next}`, { replace: true });
    }
  }, [signedOutElsewhere, loc.path, loc.href, loc.search]);
  const signedInOnLogin = !!session && route.page === 'login';
  useEffect(() => {
    if (signedInOnLogin) navigate(safeNext(loc.search.get('next')), { replace: true });
  }, [signedInOnLogin, loc.search]);

  if (loadError) {
    return (
      <main className="center-page">
        <ErrorBox error={loadError} retry={loadSession} />
      </main>
    );
  }
  if (session === undefined) {
    return (
      <main className="center-page">
        <Loading />
      </main>
    );
  }
  if (route.page === 'login' || !session) {
    if (session) return null;
    return (
      <Login
        onSignedIn={(s) => {
          setCsrfToken(s.csrf_token);
          setSession(s);
          const next = safeNext(new URLSearchParams(window.location.search).get('next'));
          navigate(s.user.has_password ? next : '/settings/account', { replace: true });
        }}
      />
    );
  }

  const signOut = async () => {
    try {
      await api('POST', '/logout');
    } finally {
      setSession(null);
      await loadSession();
      navigate('/login', { replace: true });
    }
  };

  return (
    <Layout session={session} path={loc.path} onSignOut={signOut}>
      {route.page === 'not-found' ? (
        <NotFound />
      ) : (
        PAGES[route.page]({ session, params: route.params, reloadSession: loadSession })
      )}
    </Layout>
  );
}
