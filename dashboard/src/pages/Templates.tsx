import { type FormEvent, useState } from 'react';
import { Badge, Empty, ErrorBox, Field, fieldError, LoadMore, Loading, PageHeader, Time } from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { useAction, usePaged } from '../lib/hooks.ts';
import { Link, navigate } from '../lib/router.tsx';
import type { Template } from '../lib/types.ts';

/** Stored templates: the list and a form to start a new one (docs/templates.md). */
export function Templates() {
  const list = usePaged((cursor) => api<Page<Template>>('GET', `/templates${query({ limit: 50, cursor })}`), []);
  const [name, setName] = useState('');
  const create = useAction(() =>
    api<Template>('POST', '/templates', {
      name: name.trim(),
      subject: 'Hello {{first}}',
      html: '<p>Hi {{first}},</p>\n<p>…</p>',
      defaults: { first: 'there' },
    }),
  );
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const t = await create.run();
    if (t) navigate(`/templates/${t.id}`);
  };
  return (
    <>
      <PageHeader title="Templates">
        <p>
          Stored templates keep your mail's design out of your code. Send one with <code>content.template_id</code>:
          edits are drafts until you publish them.
        </p>
      </PageHeader>
      <form className="card form form-inline" onSubmit={submit} aria-labelledby="new-template">
        <h2 id="new-template">New template</h2>
        <ErrorBox error={create.error} />
        <Field label="Name" hint="unique, e.g. welcome or receipt" error={fieldError(create.error, 'name')}>
          {(p) => <input {...p} required maxLength={128} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <button type="submit" className="btn btn-primary" disabled={create.busy}>
          {create.busy ? 'Creating…' : 'Create template'}
        </button>
      </form>
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No templates yet">
          <p>Create one above, then edit it with a live preview.</p>
        </Empty>
      ) : null}
      {list.items.length > 0 ? (
        <div className="table-wrap card">
          <table className="table" aria-label="Templates">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Published</th>
                <th scope="col">Draft</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((t) => (
                <tr key={t.id}>
                  <td>
                    <Link to={`/templates/${t.id}`}>{t.name}</Link>
                    {t.description ? <div className="muted small">{t.description}</div> : null}
                  </td>
                  <td>
                    {t.published ? (
                      <Badge tone="ok">v{t.published.version}</Badge>
                    ) : (
                      <Badge tone="muted">not published</Badge>
                    )}
                  </td>
                  <td>
                    v{t.draft?.version}
                    {t.draft && t.draft.version !== t.published?.version ? (
                      <Badge tone="warn">unpublished changes</Badge>
                    ) : null}
                  </td>
                  <td>
                    <Time iso={t.updated_at} relative />
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
