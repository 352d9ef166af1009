import { useState } from 'react';
import { Badge, ConfirmButton, Empty, ErrorBox, Loading, SecretOnce, StatusBadge, Time } from '../components/ui.tsx';
import { api, type Page } from '../lib/api.ts';
import { truncate } from '../lib/format.ts';
import { useAction, useAsync } from '../lib/hooks.ts';
import type { TestResult, Webhook, WebhookDelivery } from '../lib/types.ts';
import { type WebhookInput, WebhookForm } from './WebhookForm.tsx';

function Deliveries({ hookId, version }: { hookId: string; version: number }) {
  const list = useAsync(
    () => api<Page<WebhookDelivery>>('GET', `/webhooks/${hookId}/deliveries?limit=10`),
    [hookId, version],
  );
  return (
    <section className="deliveries" aria-label="Recent deliveries">
      <div className="row-between">
        <h3>Recent deliveries</h3>
        <button type="button" className="btn btn-small" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {list.data && list.data.data.length === 0 ? (
        <Empty title="No deliveries yet">
          <p>Send a test to check the endpoint.</p>
        </Empty>
      ) : null}
      {list.data?.data.length ? (
        <div className="table-wrap">
          <table className="table table-compact">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Outcome</th>
                <th scope="col">Response</th>
                <th scope="col">Duration</th>
                <th scope="col">Attempt</th>
              </tr>
            </thead>
            <tbody>
              {list.data.data.map((d) => (
                <tr key={d.id}>
                  <td className="nowrap">
                    <Time iso={d.created_at} />
                  </td>
                  <td>
                    <StatusBadge status={d.outcome} /> {d.test ? <Badge tone="info">test</Badge> : null}
                  </td>
                  <td className="break">
                    {d.status_code !== null ? `HTTP ${d.status_code}` : 'no answer'}
                    {d.error ? ` · ${truncate(d.error, 140)}` : ''}
                  </td>
                  <td className="nowrap">{d.duration_ms} ms</td>
                  <td>
                    {d.attempt}
                    {d.next_attempt_at ? (
                      <span className="muted">
                        {' '}
                        · next <Time iso={d.next_attempt_at} relative />
                      </span>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}

export function WebhookCard({
  hook,
  onChanged,
  onDeleted,
}: {
  hook: Webhook;
  onChanged: (h: Webhook) => void;
  onDeleted: () => void;
}) {
  const [editing, setEditing] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const [result, setResult] = useState<TestResult | null>(null);
  const [version, setVersion] = useState(0);
  const path = `/webhooks/${hook.id}`;
  const save = useAction(async (input: WebhookInput) => {
    const body: Partial<WebhookInput> = { ...input };
    if (!body.name) delete body.name;
    onChanged(await api<Webhook>('PATCH', path, body));
    setEditing(false);
  });
  const toggle = useAction(async () => onChanged(await api<Webhook>('PATCH', path, { enabled: !hook.enabled })));
  const test = useAction(async () => {
    setResult(null);
    setResult(await api<TestResult>('POST', `${path}/test`));
    setVersion((v) => v + 1);
  });
  const rotate = useAction(async () =>
    setSecret((await api<{ secret: string }>('POST', `${path}/rotate-secret`)).secret),
  );
  const remove = useAction(async () => {
    await api('DELETE', path);
    onDeleted();
  });
  const error = toggle.error ?? test.error ?? rotate.error ?? remove.error;

  return (
    <article className="card webhook" aria-labelledby={`hook-${hook.id}`}>
      <header className="card-header">
        <h2 id={`hook-${hook.id}`}>{hook.name}</h2>
        <StatusBadge status={hook.status} />
      </header>
      {hook.status === 'disabled' && hook.disabled_reason ? (
        <p className="muted">Disabled: {hook.disabled_reason}</p>
      ) : null}
      {editing ? (
        <WebhookForm
          initial={hook}
          submitLabel="Save changes"
          busy={save.busy}
          error={save.error}
          onSubmit={(input) => void save.run(input)}
          onCancel={() => setEditing(false)}
        />
      ) : (
        <dl className="props">
          <dt>URL</dt>
          <dd className="break">
            <code>{hook.url}</code>
          </dd>
          <dt>Events</dt>
          <dd className="scope-list">
            {hook.events.includes('*') ? 'All events' : hook.events.map((e) => <code key={e}>{e}</code>)}
          </dd>
          <dt>Delivery</dt>
          <dd>
            {hook.dispatch_policy === 'batch'
              ? `Batches of up to ${hook.batch_max_size} events, within ${hook.batch_max_wait_ms} ms`
              : 'One event per request'}
          </dd>
        </dl>
      )}
      {secret ? <SecretOnce title="New signing secret" value={secret} onDone={() => setSecret(null)} /> : null}
      <ErrorBox error={error} />
      {result ? (
        <div className={`alert ${result.delivered ? 'alert-ok' : 'alert-error'}`} role="status">
          {result.delivered
            ? `Test delivered: HTTP ${result.status_code} in ${result.duration_ms} ms.`
            : `Test failed${result.status_code !== null ? `: HTTP ${result.status_code}` : ''}${result.error ? ` (${result.error})` : ''} after ${result.duration_ms} ms.`}
        </div>
      ) : null}
      {!editing ? (
        <div className="button-row">
          <button
            type="button"
            className="btn btn-primary btn-small"
            onClick={() => void test.run()}
            disabled={test.busy}
          >
            {test.busy ? 'Sending…' : 'Send test'}
          </button>
          <button type="button" className="btn btn-small" onClick={() => setEditing(true)}>
            Edit
          </button>
          <button type="button" className="btn btn-small" onClick={() => void toggle.run()} disabled={toggle.busy}>
            {hook.enabled ? 'Disable' : 'Enable'}
          </button>
          <ConfirmButton
            label="Rotate secret"
            confirmLabel="Rotate now (old secret works 24 h)"
            busy={rotate.busy}
            onConfirm={() => void rotate.run()}
          />
          <ConfirmButton
            label="Delete"
            confirmLabel={`Delete “${hook.name}”`}
            busy={remove.busy}
            onConfirm={() => void remove.run()}
          />
        </div>
      ) : null}
      <Deliveries hookId={hook.id} version={version} />
    </article>
  );
}
