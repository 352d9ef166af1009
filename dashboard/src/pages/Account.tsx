import { type FormEvent, useState } from 'react';
import { ErrorBox, Field, fieldError, PageHeader, Time } from '../components/ui.tsx';
import { api } from '../lib/api.ts';
import type { Session } from '../lib/types.ts';

export function Account({ session, onChanged }: { session: Session; onChanged: () => void }) {
  const needsCurrent = session.user.has_password && !session.password_reset_allowed;
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [done, setDone] = useState(false);
  const [mismatch, setMismatch] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | undefined>(undefined);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setDone(false);
    setError(undefined);
    setMismatch(password !== repeat);
    if (password !== repeat) return;
    setBusy(true);
    try {
      await api('POST', '/password', { password, ...(needsCurrent ? { current_password: current } : {}) });
      setDone(true);
      setCurrent('');
      setPassword('');
      setRepeat('');
      onChanged();
    } catch (err) {
      setError(err instanceof Error ? err : new Error(String(err)));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <PageHeader title="Account" />
      <section className="card">
        <dl className="props">
          <dt>Email</dt>
          <dd>{session.user.email}</dd>
          <dt>Account</dt>
          <dd>
            {session.tenant.name} <span className="muted">({session.tenant.id})</span>
          </dd>
          <dt>Default sender</dt>
          <dd>{session.tenant.default_from ?? '–'}</dd>
          <dt>Session ends</dt>
          <dd>
            <Time iso={session.expires_at} relative /> without activity
          </dd>
        </dl>
      </section>
      <form className="card form" onSubmit={submit} aria-labelledby="pw-title">
        <h2 id="pw-title">{session.user.has_password ? 'Change password' : 'Set a password'}</h2>
        {!session.user.has_password ? (
          <p>You signed in with a one-time link. Set a password to sign in next time.</p>
        ) : null}
        <ErrorBox error={error} />
        {done ? (
          <p className="alert alert-ok" role="status">
            Password saved. Your other sessions were signed out.
          </p>
        ) : null}
        {needsCurrent ? (
          <Field label="Current password" error={fieldError(error, 'current_password')}>
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="current-password"
                required
                value={current}
                onChange={(e) => setCurrent(e.target.value)}
              />
            )}
          </Field>
        ) : null}
        <Field label="New password" hint="At least 8 characters." error={fieldError(error, 'password')}>
          {(p) => (
            <input
              {...p}
              type="password"
              autoComplete="new-password"
              required
              minLength={8}
              value={password}
              onChange={(e) => setPassword(e.target.value)}
            />
          )}
        </Field>
        <Field label="Repeat new password" error={mismatch ? 'The passwords differ' : undefined}>
          {(p) => (
            <input
              {...p}
              type="password"
              autoComplete="new-password"
              required
              value={repeat}
              onChange={(e) => setRepeat(e.target.value)}
            />
          )}
        </Field>
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save password'}
        </button>
      </form>
    </>
  );
}
