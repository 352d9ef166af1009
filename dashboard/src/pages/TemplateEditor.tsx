import { type FormEvent, useEffect, useState } from 'react';
import { Badge, ConfirmButton, ErrorBox, Field, fieldError, Loading, PageHeader, Time } from '../components/ui.tsx';
import { ApiError, api, type Page } from '../lib/api.ts';
import { useAction, useAsync } from '../lib/hooks.ts';
import { navigate } from '../lib/router.tsx';
import type { Template, TemplatePreview, TemplateVersion } from '../lib/types.ts';

interface Draft {
  subject: string;
  text: string;
  html: string;
  from: string;
  defaults: string;
}

function draftOf(v: TemplateVersion | null): Draft {
  return {
    subject: v?.subject ?? '',
    text: v?.text ?? '',
    html: v?.html ?? '',
    from: v?.from ?? '',
    defaults: JSON.stringify(v?.defaults ?? {}, null, 2),
  };
}

/** JSON object text -> object; throws a readable error for the form. */
function jsonObject(text: string, field: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = text.trim() === '' ? {} : JSON.parse(text);
  } catch {
    throw new ApiError(422, [{ code: 'validation_failed', field, message: `${field}: not valid JSON` }]);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v))
    throw new ApiError(422, [{ code: 'validation_failed', field, message: `${field}: must be a JSON object` }]);
  return v as Record<string, unknown>;
}

/** The preview of what is typed, re-rendered shortly after each change. */
function LivePreview({ draft, sample }: { draft: Draft; sample: string }) {
  const [preview, setPreview] = useState<TemplatePreview | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  useEffect(() => {
    let stale = false;
    const timer = setTimeout(() => {
      (async () => {
        try {
          const out = await api<TemplatePreview>('POST', '/template-render', {
            subject: draft.subject,
            text: draft.text === '' ? null : draft.text,
            html: draft.html === '' ? null : draft.html,
            defaults: jsonObject(draft.defaults, 'defaults'),
            substitution_data: jsonObject(sample, 'sample data'),
          });
          if (!stale) {
            setPreview(out);
            setError(undefined);
          }
        } catch (e) {
          if (!stale) setError(e instanceof Error ? e : new Error(String(e)));
        }
      })();
    }, 300);
    return () => {
      stale = true;
      clearTimeout(timer);
    };
  }, [draft, sample]);
  return (
    <section className="card" aria-labelledby="preview-title">
      <h2 id="preview-title">Preview</h2>
      <ErrorBox error={error} />
      {preview ? (
        <>
          <p>
            <strong>Subject:</strong> <span data-testid="preview-subject">{preview.subject}</span>
          </p>
          {preview.html !== null ? (
            <iframe
              title="HTML preview"
              className="preview-frame"
              // No scripts, no same-origin access: the html is the tenant's content.
              sandbox=""
              srcDoc={preview.html}
            />
          ) : null}
          <h3>Text part</h3>
          <pre className="preview-text" data-testid="preview-text">
            {preview.text}
          </pre>
        </>
      ) : null}
    </section>
  );
}

function Versions({ id, published, reloadKey }: { id: string; published: number | null; reloadKey: number }) {
  const versions = useAsync(
    () => api<Page<TemplateVersion>>('GET', `/templates/${id}/versions?limit=20`),
    [id, reloadKey],
  );
  return (
    <section className="card" aria-labelledby="versions-title">
      <h2 id="versions-title">Version history</h2>
      <ErrorBox error={versions.error} retry={versions.reload} />
      <ol className="plain-list" aria-label="Versions">
        {(versions.data?.data ?? []).map((v) => (
          <li key={v.version}>
            v{v.version} {v.version === published ? <Badge tone="ok">published</Badge> : null} — {v.subject}{' '}
            <span className="muted small">
              <Time iso={v.created_at} relative />
            </span>
          </li>
        ))}
      </ol>
    </section>
  );
}

export function TemplateEditor({ id }: { id: string }) {
  const tpl = useAsync(() => api<Template>('GET', `/templates/${id}`), [id]);
  const [draft, setDraft] = useState<Draft | undefined>(undefined);
  const [sample, setSample] = useState('{}');
  const [testTo, setTestTo] = useState('');
  const [saved, setSaved] = useState(0);
  const [notice, setNotice] = useState('');
  useEffect(() => {
    if (tpl.data && !draft) setDraft(draftOf(tpl.data.draft));
  }, [tpl.data, draft]);

  const save = useAction(async () => {
    if (!draft) return;
    const t = await api<Template>('PATCH', `/templates/${id}`, {
      subject: draft.subject,
      text: draft.text === '' ? null : draft.text,
      html: draft.html === '' ? null : draft.html,
      from: draft.from.trim() === '' ? null : draft.from.trim(),
      defaults: jsonObject(draft.defaults, 'defaults'),
    });
    tpl.setData(() => t);
    setSaved((n) => n + 1);
    setNotice(`Saved as draft version ${t.draft?.version}.`);
  });
  const publish = useAction(async () => {
    const t = await api<Template>('POST', `/templates/${id}/publish`);
    tpl.setData(() => t);
    setSaved((n) => n + 1);
    setNotice(`Published version ${t.published?.version}.`);
  });
  const sendTest = useAction(async () => {
    const r = await api<{ transmission_id: string }>('POST', `/templates/${id}/send-test`, {
      email: testTo.trim(),
      substitution_data: jsonObject(sample, 'sample data'),
      draft: true,
    });
    setNotice(`Test sent to ${testTo.trim()} (transmission ${r.transmission_id}).`);
  });
  const remove = useAction(async () => {
    await api('DELETE', `/templates/${id}`);
    navigate('/templates');
  });

  if (tpl.loading && !tpl.data) return <Loading />;
  if (tpl.error || !tpl.data || !draft) return <ErrorBox error={tpl.error} retry={tpl.reload} />;
  const t = tpl.data;
  const set = (k: keyof Draft) => (e: { target: { value: string } }) => setDraft({ ...draft, [k]: e.target.value });
  const onSave = (e: FormEvent) => {
    e.preventDefault();
    void save.run();
  };
  const unpublished = t.draft?.version !== t.published?.version;
  return (
    <>
      <PageHeader title={t.name}>
        <p>
          Draft v{t.draft?.version}
          {t.published ? `, published v${t.published.version}` : ', not published yet'}
          {unpublished ? ' (the draft has unpublished changes)' : ''}. Sends use the published version.
        </p>
      </PageHeader>
      {notice ? (
        <p className="alert" role="status">
          {notice}
        </p>
      ) : null}
      <div className="two-col">
        <form className="card form" onSubmit={onSave} aria-labelledby="edit-title">
          <h2 id="edit-title">Edit</h2>
          <ErrorBox error={save.error ?? publish.error} />
          <Field label="Subject" error={fieldError(save.error, 'subject')}>
            {(p) => <input {...p} required maxLength={998} value={draft.subject} onChange={set('subject')} />}
          </Field>
          <Field label="HTML" hint="{{name}} is escaped here, {{{name}}} is not" error={fieldError(save.error, 'html')}>
            {(p) => <textarea {...p} rows={10} value={draft.html} onChange={set('html')} />}
          </Field>
          <Field label="Text" hint="empty: generated from the HTML" error={fieldError(save.error, 'text')}>
            {(p) => <textarea {...p} rows={5} value={draft.text} onChange={set('text')} />}
          </Field>
          <Field
            label="From"
            hint="optional, e.g. {{shop}} <news@mail.example.com>"
            error={fieldError(save.error, 'from')}
          >
            {(p) => <input {...p} maxLength={512} value={draft.from} onChange={set('from')} />}
          </Field>
          <Field label="Defaults (JSON)" error={fieldError(save.error, 'defaults')}>
            {(p) => <textarea {...p} rows={3} value={draft.defaults} onChange={set('defaults')} />}
          </Field>
          <Field label="Sample data (JSON)" hint="used by the preview and the test send; not saved">
            {(p) => <textarea {...p} rows={3} value={sample} onChange={(e) => setSample(e.target.value)} />}
          </Field>
          <div className="button-row">
            <button type="submit" className="btn btn-primary" disabled={save.busy}>
              {save.busy ? 'Saving…' : 'Save draft'}
            </button>
            <button type="button" className="btn" onClick={() => void publish.run()} disabled={publish.busy}>
              {publish.busy ? 'Publishing…' : `Publish v${t.draft?.version}`}
            </button>
            <ConfirmButton
              label="Delete"
              confirmLabel={`Delete ${t.name}`}
              busy={remove.busy}
              onConfirm={() => void remove.run()}
            />
          </div>
        </form>
        <LivePreview draft={draft} sample={sample} />
      </div>
      <form
        className="card form form-inline"
        aria-labelledby="test-title"
        onSubmit={(e) => {
          e.preventDefault();
          void sendTest.run();
        }}
      >
        <h2 id="test-title">Send a test</h2>
        <ErrorBox error={sendTest.error} />
        <Field label="To" hint="sends the saved draft with the sample data" error={fieldError(sendTest.error, 'email')}>
          {(p) => <input {...p} type="email" required value={testTo} onChange={(e) => setTestTo(e.target.value)} />}
        </Field>
        <button type="submit" className="btn" disabled={sendTest.busy}>
          {sendTest.busy ? 'Sending…' : 'Send test'}
        </button>
      </form>
      <Versions id={id} published={t.published?.version ?? null} reloadKey={saved} />
    </>
  );
}
