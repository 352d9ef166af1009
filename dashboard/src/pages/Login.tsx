import { type FormEvent, useEffect, useRef, useState } from 'react';
import { ErrorBox, Loading } from '../components/ui.tsx';
import { ApiError, api, setCsrfToken } from '../lib/api.ts';
import type { Session, SignedOut } from '../lib/types.ts';

/** Refreshes the sign-in form's CSRF token (e.g. after its cookie expired) and retries once. */
async function withFreshToken<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 403) throw e;
    const s = await api<Session | SignedOut>('GET', '/session');
    setCsrfToken(s.csrf_token);
    return call();
  }
}

export function Login({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [linking, setLinking] = useState(false);
  const started = useRef(false);

  useEffect(() => {
    document.title = 'Sign in · Postyard';
    // A one-time link: /login#token=... (the fragment never reaches the server's logs).
    const token = new URLSearchParams(window.location.hash.slice(1)).get('token');
    if (!token || started.current) return;
    started.current = true;
    window.history.replaceState(null, '', window.location.pathname + window.location.search);
    setLinking(true);
    withFreshToken(() => api<Session>('POST', '/login/link', { token }))
      .then(onSignedIn)
      .catch((e: unknown) => {
        setError(e instanceof Error ? e : new Error(String(e)));
        setLinking(false);
      });
  }, [onSignedIn]);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      onSignedIn(await withFreshToken(() => api<Session>('POST', '/login', { email, password })));
    } catch (err) {
      setError(err instanceof Error ? err : new Error(String(err)));
      setPassword('');
      setBusy(false);
    }
  };

  return (
    <main className="login-page">
      <div className="login-card">
        <p className="brand login-brand">
          <span className="brand-mark" aria-hidden="true" />
          Postyard
        </p>
        <h1>Sign in</h1>
        {linking ? (
          <Loading label="Signing you in with your link…" />
        ) : (
          <form onSubmit={submit} noValidate={false}>
            <ErrorBox error={error} />
            <div className="field">
              <label htmlFor="login-email">Email</label>
              <input
                id="login-email"
                type="email"
                name="email"
                autoComplete="username"
                required
                value={email}
                onChange={(e) => setEmail(e.target.value)}
              />
            </div>
            <div className="field">
              <label htmlFor="login-password">Password</label>
              <input
                id="login-password"
                type="password"
                name="password"
                autoComplete="current-password"
                required
                value={password}
                onChange={(e) => setPassword(e.target.value)}
              />
            </div>
            <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
              {busy ? 'Signing in…' : 'Sign in'}
            </button>
          </form>
        )}
        <p className="hint login-hint">
          No account or forgot your password? An operator can create one with <code>postyard users create</code> or send
          a new sign-in link with <code>postyard users link</code>.
        </p>
      </div>
    </main>
  );
}
