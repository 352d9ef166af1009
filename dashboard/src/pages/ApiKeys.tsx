import { type FormEvent, useState } from 'react';
import { SCOPES } from '../../../src/modules/api-keys/scopes.ts';
import {
  ConfirmButton,
  Empty,
  ErrorBox,
  Field,
  fieldError,
  LoadMore,
  Loading,
  PageHeader,
  SecretOnce,
  Time,
} from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { useAction, usePaged } from '../lib/hooks.ts';
import type { ApiKey } from '../lib/types.ts';

type Created = ApiKey & { key: string };

function CreateKey({ onCreated }: { onCreated: (k: Created) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>(['send:transmissions']);
  const create = useAction(() => api<Created>('POST', '/api-keys', { name, scopes }));
  const all = scopes.length === SCOPES.length;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const k = await create.run();
    if (k) {
      setName('');
      onCreated(k);
    }
  };
  const toggle = (s: string, on: boolean) => setScopes(on ? [...scopes, s] : scopes.filter((x) => x !== s));
  return (
    <form className="card form" onSubmit={submit} aria-labelledby="create-key-title">
      <h2 id="create-key-title">Create an API key</h2>
      <ErrorBox error={create.error} />
      <Field label="Name" hint="What uses this key, e.g. “web app”." error={fieldError(create.error, 'name')}>
        {(p) => <input {...p} value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />}
      </Field>
      <fieldset className="scopes">
        <legend>Scopes</legend>
        <label className="check">
          <input type="checkbox" checked={all} onChange={(e) => setScopes(e.target.checked ? [...SCOPES] : [])} />
          All scopes
        </label>
        {SCOPES.map((s) => (
          <label className="check" key={s}>
            <input type="checkbox" checked={scopes.includes(s)} onChange={(e) => toggle(s, e.target.checked)} />
            <code>{s}</code>
          </label>
        ))}
        {fieldError(create.error, 'scopes') ? (
          <p className="field-error">{fieldError(create.error, 'scopes')}</p>
        ) : null}
      </fieldset>
      <button type="submit" className="btn btn-primary" disabled={create.busy || scopes.length === 0}>
        {create.busy ? 'Creating…' : 'Create key'}
      </button>
    </form>
  );
}

export function ApiKeys() {
  const list = usePaged((cursor) => api<Page<ApiKey>>('GET', `/api-keys${query({ limit: 100, cursor })}`), []);
  const [created, setCreated] = useState<Created | null>(null);
  const revoke = useAction(async (id: string) => {
    await api('DELETE', `/api-keys/${id}`);
    list.update((items) => items.filter((k) => k.id !== id));
  });

  return (
    <>
      <PageHeader title="API keys">
        <p>
          Keys authenticate calls to the HTTP API (<code>Authorization: Bearer pyk_…</code>). Give each application its
          own key with only the scopes it needs.
        </p>
      </PageHeader>
      {created ? (
        <SecretOnce
          title={`Your new key “${created.name}”`}
          value={created.key}
          onDone={() => {
            setCreated(null);
            list.reload();
          }}
        />
      ) : (
        <CreateKey
          onCreated={(k) => {
            setCreated(k);
            list.reload();
          }}
        />
      )}
      <h2>Keys</h2>
      <ErrorBox error={revoke.error} />
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No API keys">
          <p>Create one above to send mail over HTTP.</p>
        </Empty>
      ) : null}
      {list.items.length ? (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Scopes</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((k) => (
                <tr key={k.id}>
                  <td className="break">{k.name}</td>
                  <td>
                    <code>{k.key_prefix}…</code>
                  </td>
                  <td className="scope-list">
                    {k.scopes.length === SCOPES.length ? 'all scopes' : k.scopes.map((s) => <code key={s}>{s}</code>)}
                  </td>
                  <td className="nowrap">
                    <Time iso={k.created_at} relative />
                  </td>
                  <td className="nowrap">
                    <Time iso={k.last_used_at} relative />
                  </td>
                  <td className="actions">
                    <ConfirmButton
                      label="Revoke"
                      confirmLabel={`Revoke “${k.name}”`}
                      busy={revoke.busy}
                      onConfirm={() => void revoke.run(k.id)}
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
