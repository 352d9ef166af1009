import { type FormEvent, useId, useRef, useState } from 'react';
import { ErrorBox } from '../components/ui.tsx';
import { type ImportReport, uploadSuppressionsCsv } from '../lib/api.ts';
import { formatNumber } from '../lib/format.ts';

/** CSV import with upload progress and the server's report of imported and skipped rows. */
export function CsvImport({ onImported }: { onImported: () => void }) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<File | null>(null);
  const [progress, setProgress] = useState<number | null>(null);
  const [report, setReport] = useState<ImportReport | null>(null);
  const [error, setError] = useState<Error | undefined>(undefined);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!file) return;
    setReport(null);
    setError(undefined);
    setProgress(0);
    try {
      setReport(await uploadSuppressionsCsv(file, setProgress));
      onImported();
      setFile(null);
      if (input.current) input.current.value = '';
    } catch (err) {
      setError(err instanceof Error ? err : new Error(String(err)));
    } finally {
      setProgress(null);
    }
  };
  const uploading = progress !== null;

  return (
    <form className="card form" onSubmit={submit} aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Import a CSV file</h2>
      <p className="hint">
        Header row <code>identifier,type,reason_category,description</code>; only <code>identifier</code> is required
        (type defaults to email, reason to manual). Bad rows are skipped and listed.
      </p>
      <div className="field">
        <label htmlFor={`${id}-file`}>CSV file</label>
        <input
          ref={input}
          id={`${id}-file`}
          type="file"
          accept=".csv,text/csv"
          onChange={(e) => setFile(e.target.files?.[0] ?? null)}
        />
      </div>
      {uploading ? (
        <div className="progress">
          <label htmlFor={`${id}-progress`}>{progress < 1 ? 'Uploading…' : 'Importing…'}</label>
          <progress id={`${id}-progress`} max={1} value={progress < 1 ? progress : undefined} />
        </div>
      ) : null}
      <ErrorBox error={error} />
      {report ? (
        <div
          className={`alert ${report.skipped ? 'alert-warn' : 'alert-ok'}`}
          role="status"
          data-testid="import-report"
        >
          <p>
            Imported {formatNumber(report.imported)} {report.imported === 1 ? 'row' : 'rows'}; skipped{' '}
            {formatNumber(report.skipped)}.
          </p>
          {report.errors.length ? (
            <ul className="import-errors">
              {report.errors.map((er) => (
                <li key={`${er.line}-${er.message}`}>
                  Line {er.line}: {er.message}
                </li>
              ))}
            </ul>
          ) : null}
        </div>
      ) : null}
      <button type="submit" className="btn btn-primary" disabled={!file || uploading}>
        {uploading ? 'Importing…' : 'Import'}
      </button>
    </form>
  );
}
