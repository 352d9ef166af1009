import { type FormEvent, useState } from 'react';
import {
  ConfirmButton,
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
import { navigate, useLocation } from '../lib/router.tsx';
import type { Suppression } from '../lib/types.ts';
import { CsvImport } from './SuppressionsImport.tsx';

export const REASONS = ['manual', 'unsubscribe', 'hard_bounce', 'complaint', 'invalid'] as const;

function AddSuppression({ onAdded }: { onAdded: () => void }) {
  const [identifier, setIdentifier] = useState('');
  const [type, setType] = useState<'email' | 'domain'>('email');
  const [reason, setReason] = useState<string>('manual');
  const [description, setDescription] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const add = useAction(() =>
    api<{ created: number; updated: number }>('POST', '/suppressions', {
      identifier,
      type,
      reason_category: reason,
      ...(description.trim() ? { description: description.trim() } : {}),
    }),
  );
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setDone(null);
    const res = await add.run();
    if (res) {
      setDone(`${identifier.trim()} ${res.created ? 'added' : 'updated'}.`);
      setIdentifier('');
      setDescription('');
      onAdded();
    }
  };
  return (
    <form className="card form" onSubmit={submit} aria-labelledby="add-supp">
      <h2 id="add-supp">Add a suppression</h2>
      <ErrorBox error={add.error} />
      {done ? (
        <p className="alert alert-ok" role="status">
          {done}
        </p>
      ) : null}
      <div className="form-row">
        <Field label="Address or domain" error={fieldError(add.error, 'identifier') ?? fieldError(add.error, 'items')}>
          {(p) => (
            <input
              {...p}
              required
              maxLength={320}
              value={identifier}
              placeholder={type === 'email' ? 'ann@example.com' : 'example.com'}
              onChange={(e) => setIdentifier(e.target.value)}
            />
          )}
        </Field>
        <Field label="Type">
          {(p) => (
            <select {...p} value={type} onChange={(e) => setType(e.target.value as 'email' | 'domain')}>
              <option value="email">Email address</option>
              <option value="domain">Whole domain</option>
            </select>
          )}
        </Field>
        <Field label="Reason">
          {(p) => (
            <select {...p} value={reason} onChange={(e) => setReason(e.target.value)}>
              {REASONS.map((r) => (
                <option key={r} value={r}>
                  {r.replace('_', ' ')}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <Field label="Note (optional)">
        {(p) => <input {...p} maxLength={1024} value={description} onChange={(e) => setDescription(e.target.value)} />}
      </Field>
      <button type="submit" className="btn btn-primary" disabled={add.busy}>
        {add.busy ? 'Adding…' : 'Add suppression'}
      </button>
    </form>
  );
}

export function Suppressions() {
  const loc = useLocation();
  const q = {
    identifier: loc.search.get('identifier') ?? '',
    type: loc.search.get('type') ?? '',
    reason: loc.search.get('reason_category') ?? '',
  };
  const [search, setSearch] = useState(q);
  const key = loc.search.toString();
  const list = usePaged(
    (cursor) =>
      api<Page<Suppression>>(
        'GET',
        `/suppressions${query({ identifier: q.identifier, type: q.type, reason_category: q.reason, limit: 100, cursor })}`,
      ),
    [key],
  );
  const remove = useAction(async (id: string) => {
    await api('DELETE', `/suppressions/${id}`);
    list.update((items) => items.filter((s) => s.id !== id));
  });
  const submitSearch = (e: FormEvent) => {
    e.preventDefault();
    navigate(
      `/suppressions${query({ identifier: search.identifier.trim(), type: search.type, reason_category: search.reason })}`,
    );
  };

  return (
    <>
      <PageHeader title="Suppressions">
        <p>
          Addresses and domains Postyard never sends to. Hard bounces, complaints and unsubscribes are added
          automatically.
        </p>
      </PageHeader>
      <div className="two-col">
        <AddSuppression onAdded={list.reload} />
        <CsvImport onImported={list.reload} />
      </div>
      <h2>Suppression list</h2>
      <form className="filters" onSubmit={submitSearch} aria-label="Search suppressions">
        <div className="field">
          <label htmlFor="s-identifier">Search address or domain</label>
          <input
            id="s-identifier"
            type="search"
            value={search.identifier}
            placeholder="exact address or domain"
            onChange={(e) => setSearch({ ...search, identifier: e.target.value })}
          />
        </div>
        <div className="field">
          <label htmlFor="s-type">Type</label>
          <select id="s-type" value={search.type} onChange={(e) => setSearch({ ...search, type: e.target.value })}>
            <option value="">Any</option>
            <option value="email">Email address</option>
            <option value="domain">Domain</option>
          </select>
        </div>
        <div className="field">
          <label htmlFor="s-reason">Reason</label>
          <select
            id="s-reason"
            value={search.reason}
            onChange={(e) => setSearch({ ...search, reason: e.target.value })}
          >
            <option value="">Any</option>
            {REASONS.map((r) => (
              <option key={r} value={r}>
                {r.replace('_', ' ')}
              </option>
            ))}
          </select>
        </div>
        <div className="filter-actions">
          <button type="submit" className="btn btn-primary">
            Search
          </button>
          {key ? (
            <button
              type="button"
              className="btn"
              onClick={() => {
                setSearch({ identifier: '', type: '', reason: '' });
                navigate('/suppressions');
              }}
            >
              Clear
            </button>
          ) : null}
        </div>
      </form>
      <ErrorBox error={remove.error} />
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title={key ? 'No suppression matches' : 'No suppressions'}>
          <p>
            {key
              ? 'The search matches exact addresses or domains.'
              : 'Nothing is blocked: every address can receive mail.'}
          </p>
        </Empty>
      ) : null}
      {list.items.length ? (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Address or domain</th>
                <th scope="col">Type</th>
                <th scope="col">Reason</th>
                <th scope="col">Source</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((s) => (
                <tr key={s.id}>
                  <td className="break">
                    {s.identifier}
                    {s.description ? <div className="muted small">{s.description}</div> : null}
                  </td>
                  <td>{s.type}</td>
                  <td>{s.reason_category.replace('_', ' ')}</td>
                  <td>{s.source}</td>
                  <td className="nowrap">
                    <Time iso={s.updated_at} relative />
                  </td>
                  <td className="actions">
                    <ConfirmButton
                      label="Delete"
                      confirmLabel={`Delete ${s.identifier}`}
                      busy={remove.busy}
                      onConfirm={() => void remove.run(s.id)}
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
