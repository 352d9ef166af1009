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
  StatusBadge,
  Time,
} from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { useAction, usePaged } from '../lib/hooks.ts';
import type { Domain } from '../lib/types.ts';

const PURPOSE: Record<string, string> = {
  dkim: 'DKIM signature key (required)',
  spf: 'SPF: lets Postyard send for the domain',
  return_path: 'Return path: bounces come back to Postyard',
  dmarc: 'DMARC policy',
};

function DomainCard({ d, onChanged, onDeleted }: { d: Domain; onChanged: (d: Domain) => void; onDeleted: () => void }) {
  const verify = useAction(async () => onChanged(await api<Domain>('POST', `/domains/${d.id}/verify`)));
  const remove = useAction(async () => {
    await api('DELETE', `/domains/${d.id}`);
    onDeleted();
  });
  return (
    <article className="card" aria-labelledby={`dom-${d.id}`}>
      <header className="card-header">
        <h2 id={`dom-${d.id}`}>{d.domain}</h2>
        <StatusBadge status={d.status} />
      </header>
      {d.status === 'verified' ? (
        <p className="muted">
          Verified <Time iso={d.verified_at} relative />. Mail from this domain is DKIM-signed.
        </p>
      ) : (
        <p>
          Publish these records at your DNS provider, then press <strong>Verify</strong>.
          {d.status_reason ? <span className="muted"> Last check: {d.status_reason}</span> : null}
        </p>
      )}
      <div className="table-wrap">
        <table className="table dns">
          <thead>
            <tr>
              <th scope="col">Record</th>
              <th scope="col">Name</th>
              <th scope="col">Value</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {d.dns_records.map((r) => (
              <tr key={`${r.purpose}-${r.name}`}>
                <td>
                  <strong>{r.type}</strong>
                  <div className="muted small">{PURPOSE[r.purpose] ?? r.purpose}</div>
                </td>
                <td className="break">
                  <code>{r.name}</code> <CopyButton text={r.name} label="Copy name" />
                </td>
                <td className="break dns-value">
                  <code>{r.value}</code> <CopyButton text={r.value} label="Copy value" />
                </td>
                <td>
                  <StatusBadge status={r.status} />
                  {r.error ? <div className="muted small">{r.error}</div> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ErrorBox error={verify.error ?? remove.error} />
      <div className="button-row">
        <button
          type="button"
          className="btn btn-primary btn-small"
          onClick={() => void verify.run()}
          disabled={verify.busy}
        >
          {verify.busy ? 'Checking DNS…' : 'Verify'}
        </button>
        <ConfirmButton
          label="Delete"
          confirmLabel={`Delete ${d.domain}`}
          busy={remove.busy}
          onConfirm={() => void remove.run()}
        />
      </div>
    </article>
  );
}

export function Domains() {
  const list = usePaged((cursor) => api<Page<Domain>>('GET', `/domains${query({ limit: 50, cursor })}`), []);
  const [domain, setDomain] = useState('');
  const add = useAction(() => api<Domain>('POST', '/domains', { domain: domain.trim() }));
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const d = await add.run();
    if (d) {
      setDomain('');
      list.update((items) => [...items, d]);
    }
  };
  return (
    <>
      <PageHeader title="Sending domains">
        <p>Domains you send from. Each gets its own DKIM key; verify the DNS records to prove you own it.</p>
      </PageHeader>
      <form className="card form form-inline" onSubmit={submit} aria-labelledby="add-domain">
        <h2 id="add-domain">Add a domain</h2>
        <ErrorBox error={add.error} />
        <Field label="Domain" hint="e.g. mail.example.com" error={fieldError(add.error, 'domain')}>
          {(p) => <input {...p} required maxLength={253} value={domain} onChange={(e) => setDomain(e.target.value)} />}
        </Field>
        <button type="submit" className="btn btn-primary" disabled={add.busy}>
          {add.busy ? 'Adding…' : 'Add domain'}
        </button>
      </form>
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No sending domains">
          <p>Add the domain of your From addresses to sign your mail with DKIM.</p>
        </Empty>
      ) : null}
      {list.items.map((d) => (
        <DomainCard
          key={d.id}
          d={d}
          onChanged={(nd) => list.update((items) => items.map((x) => (x.id === nd.id ? nd : x)))}
          onDeleted={() => list.update((items) => items.filter((x) => x.id !== d.id))}
        />
      ))}
      <LoadMore cursor={list.cursor} loading={list.loadingMore} onMore={list.loadMore} />
    </>
  );
}
