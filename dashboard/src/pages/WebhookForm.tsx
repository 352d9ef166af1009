import { type FormEvent, useState } from 'react';
import { EVENT_TYPES } from '../../../src/modules/events/events.types.ts';
import { ErrorBox, Field, fieldError } from '../components/ui.tsx';
import type { Webhook } from '../lib/types.ts';

export interface WebhookInput {
  url: string;
  name: string;
  events: string[];
  dispatch_policy: 'single' | 'batch';
  batch_max_size: number;
  batch_max_wait_ms: number;
}

const MAIL_EVENTS = EVENT_TYPES.filter((t) => t !== 'webhook.test');

/** The create and edit form of a webhook. */
export function WebhookForm({
  initial,
  submitLabel,
  busy,
  error,
  onSubmit,
  onCancel,
}: {
  initial?: Webhook;
  submitLabel: string;
  busy: boolean;
  error: Error | undefined;
  onSubmit: (input: WebhookInput) => void;
  onCancel?: () => void;
}) {
  const [url, setUrl] = useState(initial?.url ?? '');
  const [name, setName] = useState(initial?.name ?? '');
  const [all, setAll] = useState(!initial || initial.events.includes('*'));
  const [events, setEvents] = useState<string[]>(
    initial && !initial.events.includes('*') ? initial.events : ['message.delivered', 'message.bounced'],
  );
  const [policy, setPolicy] = useState<'single' | 'batch'>(initial?.dispatch_policy ?? 'single');
  const [size, setSize] = useState(String(initial?.batch_max_size ?? 100));
  const [wait, setWait] = useState(String(initial?.batch_max_wait_ms ?? 1000));
  const prefix = initial ? `edit-${initial.id}` : 'new';

  const submit = (e: FormEvent) => {
    e.preventDefault();
    onSubmit({
      url: url.trim(),
      name: name.trim(),
      events: all ? ['*'] : events,
      dispatch_policy: policy,
      batch_max_size: Number(size),
      batch_max_wait_ms: Number(wait),
    });
  };

  return (
    <form className="form" onSubmit={submit}>
      <ErrorBox error={error} />
      <Field
        label="Endpoint URL"
        hint="http:// or https://; it receives signed POST requests."
        error={fieldError(error, 'url')}
      >
        {(p) => (
          <input
            {...p}
            type="url"
            inputMode="url"
            required
            placeholder="https://example.com/postyard/events"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
          />
        )}
      </Field>
      <Field label="Name" hint="Optional; the host name is used when empty." error={fieldError(error, 'name')}>
        {(p) => <input {...p} value={name} maxLength={200} onChange={(e) => setName(e.target.value)} />}
      </Field>
      <fieldset>
        <legend>Events</legend>
        <label className="check">
          <input type="radio" name={`${prefix}-events`} checked={all} onChange={() => setAll(true)} />
          All events
        </label>
        <label className="check">
          <input type="radio" name={`${prefix}-events`} checked={!all} onChange={() => setAll(false)} />
          Only these:
        </label>
        {!all ? (
          <div className="check-grid">
            {MAIL_EVENTS.map((t) => (
              <label className="check" key={t}>
                <input
                  type="checkbox"
                  checked={events.includes(t)}
                  onChange={(e) => setEvents(e.target.checked ? [...events, t] : events.filter((x) => x !== t))}
                />
                <code>{t}</code>
              </label>
            ))}
          </div>
        ) : null}
        {fieldError(error, 'events') ? <p className="field-error">{fieldError(error, 'events')}</p> : null}
      </fieldset>
      <Field label="Delivery" hint="Batch sends up to N events in one request.">
        {(p) => (
          <select {...p} value={policy} onChange={(e) => setPolicy(e.target.value as 'single' | 'batch')}>
            <option value="single">One event per request</option>
            <option value="batch">Batches of events</option>
          </select>
        )}
      </Field>
      {policy === 'batch' ? (
        <div className="form-row">
          <Field label="Batch size (max events)" error={fieldError(error, 'batch_max_size')}>
            {(p) => (
              <input {...p} type="number" min={1} max={1000} value={size} onChange={(e) => setSize(e.target.value)} />
            )}
          </Field>
          <Field label="Max wait (ms)" error={fieldError(error, 'batch_max_wait_ms')}>
            {(p) => (
              <input {...p} type="number" min={0} max={60000} value={wait} onChange={(e) => setWait(e.target.value)} />
            )}
          </Field>
        </div>
      ) : null}
      <div className="form-actions">
        <button type="submit" className="btn btn-primary" disabled={busy || (!all && events.length === 0)}>
          {busy ? 'Saving…' : submitLabel}
        </button>
        {onCancel ? (
          <button type="button" className="btn" onClick={onCancel}>
            Cancel
          </button>
        ) : null}
      </div>
    </form>
  );
}
