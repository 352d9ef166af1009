import { type FormEvent, useState } from 'react';
import {
  ConfirmButton,
  CopyButton,
  Empty,
  ErrorBox,
  Field,
  fieldError,
  LoadMore,
  Loading,
  PageHeader,
  Time,
} from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { useAction, usePaged } from '../lib/hooks.ts';
import type { Session, SmtpCredential } from '../lib/types.ts';

type Created = SmtpCredential & { password: string };

function CreatedCredential({ c, onDone }: { c: Created; onDone: () => void }) {
  return (
    <section className="secret" aria-labelledby="smtp-created">
      <h2 id="smtp-created">SMTP credential “{c.name}”</h2>
      <p>Copy the password now: it is shown only once and cannot be retrieved later.</p>
      <dl className="props">
        <dt>Username</dt>
        <dd className="secret-row">
          <code className="secret-value">{c.username}</code>
          <CopyButton text={c.username} label="Copy username" />
        </dd>
        <dt>Password</dt>
        <dd className="secret-row">
          <code className="secret-value" data-testid="secret-value">
            {c.password}
          </code>
          <CopyButton text={c.password} label="Copy password" />
        </dd>
      </dl>
      <button type="button" className="btn" onClick={onDone}>
        Done
      </button>
    </section>
  );
}

export function Smtp({ session }: { session: Session }) {
  const list = usePaged(
    (cursor) => api<Page<SmtpCredential>>('GET', `/smtp-credentials${query({ limit: 100, cursor })}`),
    [],
  );
  const [name, setName] = useState('');
  const [created, setCreated] = useState<Created | null>(null);
  const create = useAction(() => api<Created>('POST', '/smtp-credentials', { name }));
  const remove = useAction(async (id: string) => {
    await api('DELETE', `/smtp-credentials/${id}`);
    list.update((items) => items.filter((c) => c.id !== id));
  });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const c = await create.run();
    if (c) {
      setName('');
      setCreated(c);
      list.reload();
    }
  };
  const host = window.location.hostname;

  return (
    <>
      <PageHeader title="SMTP credentials">
        <p>For software that sends mail over SMTP instead of the HTTP API.</p>
      </PageHeader>
      <section className="card">
        <h2>Connection settings</h2>
        <dl className="props">
          <dt>Server</dt>
          <dd>
            <code>{host}</code> (the host this dashboard runs on, unless your operator says otherwise)
          </dd>
          <dt>Port</dt>
          <dd>
            <code>{session.smtp.port}</code> with STARTTLS
            {session.smtp.implicit_tls_port ? (
              <>
                , or <code>{session.smtp.implicit_tls_port}</code> with implicit TLS
              </>
            ) : null}
          </dd>
          <dt>Authentication</dt>
          <dd>AUTH PLAIN or LOGIN with a username and password below</dd>
        </dl>
      </section>
      {created ? (
        <CreatedCredential c={created} onDone={() => setCreated(null)} />
      ) : (
        <form className="card form form-inline" onSubmit={submit} aria-labelledby="smtp-create">
          <h2 id="smtp-create">Create a credential</h2>
          <ErrorBox error={create.error} />
          <Field label="Name" hint="What uses it, e.g. “CRM”." error={fieldError(create.error, 'name')}>
            {(p) => <input {...p} value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />}
          </Field>
          <button type="submit" className="btn btn-primary" disabled={create.busy}>
            {create.busy ? 'Creating…' : 'Create credential'}
          </button>
        </form>
      )}
      <h2>Credentials</h2>
      <ErrorBox error={remove.error} />
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No SMTP credentials">
          <p>Create one above to send mail over SMTP.</p>
        </Empty>
      ) : null}
      {list.items.length ? (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Username</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((c) => (
                <tr key={c.id}>
                  <td className="break">{c.name}</td>
                  <td>
                    <code>{c.username}</code>
                  </td>
                  <td className="nowrap">
                    <Time iso={c.created_at} relative />
                  </td>
                  <td className="nowrap">
                    <Time iso={c.last_used_at} relative />
                  </td>
                  <td className="actions">
                    <ConfirmButton
                      label="Delete"
                      confirmLabel={`Delete “${c.name}”`}
                      busy={remove.busy}
                      onConfirm={() => void remove.run(c.id)}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <LoadMore cursor={list.cursor} loading={list.loadingMore} onMore={list.loadMore} />
    </>
  );
}
