import { type ReactNode, useEffect, useId, useRef, useState } from 'react';
import { ApiError } from '../lib/api.ts';
import { formatTime, relativeTime } from '../lib/format.ts';

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  useEffect(() => {
    document.title = `${title} · Postyard`;
  }, [title]);
  return (
    <header className="page-header">
      <h1>{title}</h1>
      {children ? <div className="page-header-lead">{children}</div> : null}
    </header>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {label}
    </p>
  );
}

/** An error of a load or an action; `retry` offers to try again. */
export function ErrorBox({ error, retry }: { error: Error | undefined; retry?: () => void }) {
  if (!error) return null;
  const details = error instanceof ApiError ? error.errors.slice(1, 6) : [];
  return (
    <div className="alert alert-error" role="alert">
      <p>{error.message}</p>
      {details.length ? (
        <ul>
          {details.map((d) => (
            <li key={`${d.field ?? ''}${d.message}`}>{d.message}</li>
          ))}
        </ul>
      ) : null}
      {retry ? (
        <button type="button" className="btn btn-small" onClick={retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children ? <div className="empty-body">{children}</div> : null}
    </div>
  );
}

export function Badge({ tone, children }: { tone: 'ok' | 'warn' | 'bad' | 'info' | 'muted'; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

const STATUS_TONES: Record<string, 'ok' | 'warn' | 'bad' | 'info' | 'muted'> = {
  verified: 'ok',
  delivered: 'ok',
  active: 'ok',
  pending: 'warn',
  deferred: 'warn',
  retrying: 'warn',
  queued: 'info',
  sending: 'info',
  accepted: 'info',
  failed: 'bad',
  bounced: 'bad',
  complained: 'bad',
  disabled: 'muted',
  suppressed: 'muted',
};

export function StatusBadge({ status }: { status: string }) {
  const key = status.replace(/^message\./, '');
  return <Badge tone={STATUS_TONES[key] ?? 'muted'}>{key}</Badge>;
}

export function Time({ iso, relative = false }: { iso: string | null | undefined; relative?: boolean }) {
  if (!iso) return <span className="muted">never</span>;
  return (
    <time dateTime={iso} title={formatTime(iso)}>
      {relative ? relativeTime(iso) : formatTime(iso)}
    </time>
  );
}

async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall back below
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const timer = useRef<number | undefined>(undefined);
  useEffect(() => () => window.clearTimeout(timer.current), []);
  const onClick = async () => {
    setState((await copyText(text)) ? 'copied' : 'failed');
    window.clearTimeout(timer.current);
    timer.current = window.setTimeout(() => setState('idle'), 2000);
  };
  return (
    <button type="button" className="btn btn-small" onClick={onClick} aria-live="polite">
      {state === 'copied' ? 'Copied' : state === 'failed' ? 'Select and copy' : label}
    </button>
  );
}

/** A secret shown once (API key, SMTP password, webhook secret) with a copy button. */
export function SecretOnce({ title, value, onDone }: { title: string; value: string; onDone: () => void }) {
  const id = useId();
  return (
    <section className="secret" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      <p>Copy it now: it is shown only once and cannot be retrieved later.</p>
      <div className="secret-row">
        <code className="secret-value" data-testid="secret-value">
          {value}
        </code>
        <CopyButton text={value} />
      </div>
      <button type="button" className="btn" onClick={onDone}>
        Done
      </button>
    </section>
  );
}

/** A destructive button that asks "are you sure?" in place, without a modal. */
export function ConfirmButton({
  label,
  confirmLabel,
  onConfirm,
  busy,
}: {
  label: string;
  confirmLabel: string;
  onConfirm: () => void;
  busy?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button type="button" className="btn btn-small btn-danger-quiet" onClick={() => setAsking(true)} disabled={busy}>
        {label}
      </button>
    );
  }
  return (
    <span className="confirm">
      <button
        type="button"
        className="btn btn-small btn-danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
        // biome-ignore lint/a11y/noAutofocus: focus moves to the question the user just asked for
        autoFocus
      >
        {confirmLabel}
      </button>
      <button type="button" className="btn btn-small" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/** A labelled form control with its error, wired with aria-describedby. */
export function Field({
  label,
  hint,
  error,
  children,
}: {
  label: string;
  hint?: string;
  error?: string | undefined;
  children: (props: { id: string; 'aria-describedby'?: string; 'aria-invalid'?: boolean }) => ReactNode;
}) {
  const id = useId();
  const hintId = `${id}-hint`;
  const errId = `${id}-err`;
  const describedBy = [hint ? hintId : '', error ? errId : ''].filter(Boolean).join(' ');
  return (
    <div className={`field${error ? ' field-invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      {children({
        id,
        ...(describedBy ? { 'aria-describedby': describedBy } : {}),
        ...(error ? { 'aria-invalid': true } : {}),
      })}
      {hint ? (
        <p className="hint" id={hintId}>
          {hint}
        </p>
      ) : null}
      {error ? (
        <p className="field-error" id={errId}>
          {error}
        </p>
      ) : null}
    </div>
  );
}

export function fieldError(error: Error | undefined, name: string): string | undefined {
  return error instanceof ApiError ? error.field(name) : undefined;
}

export function LoadMore({ cursor, loading, onMore }: { cursor: string | null; loading: boolean; onMore: () => void }) {
  if (!cursor) return null;
  return (
    <div className="load-more">
      <button type="button" className="btn" onClick={onMore} disabled={loading}>
        {loading ? 'Loading…' : 'Load more'}
      </button>
    </div>
  );
}
