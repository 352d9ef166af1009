import { Badge, Empty, ErrorBox, Loading, PageHeader } from '../components/ui.tsx';
import { api } from '../lib/api.ts';
import { useAsync } from '../lib/hooks.ts';

type Limits = {
  max_connections: number;
  messages_per_connection: number;
  messages_per_minute: number;
  messages_per_hour: number;
};

/** A site of the pacing file with this tenant's values (GET /v1/pacing/sites). */
export interface PacingSiteRow {
  site: string;
  mx: string[];
  max_connections: number | null;
  messages_per_connection: number | null;
  messages_per_minute: number | null;
  messages_per_hour: number | null;
  defaults: Limits;
  effective: Limits;
  updated_at: string | null;
}

/** An automation rule's suspension or slow-down (GET /v1/pacing/suspensions). */
export interface SuspensionRow {
  site: string;
  source_address: string | null;
  rule: string;
  action: string;
  factor: number;
  reason: string;
  started_at: string;
  until: string;
}

const FIELDS: [keyof Limits, string][] = [
  ['max_connections', 'Connections'],
  ['messages_per_connection', 'Per connection'],
  ['messages_per_minute', 'Per minute'],
  ['messages_per_hour', 'Per hour'],
];

function Cell({ row, field }: { row: PacingSiteRow; field: keyof Limits }) {
  const own = row[field];
  return (
    <td data-testid={`${row.site}-${field}`}>
      {row.effective[field].toLocaleString('en')}
      {own !== null ? (
        <div className="muted small">
          <Badge tone="warn">override</Badge> default {row.defaults[field].toLocaleString('en')}
        </div>
      ) : null}
    </td>
  );
}

/** Site limits and suspensions (docs/pacing.md); read-only, limits change through the API. */
export function Pacing() {
  const s = useAsync(() => api<{ sites: PacingSiteRow[]; suspensions: SuspensionRow[] }>('GET', '/pacing'), []);
  return (
    <>
      <PageHeader title="Pacing">
        <p>
          How fast mail leaves for each destination site, per source address and across every node. Change a limit with{' '}
          <code>PUT /v1/pacing/sites/&#123;site&#125;</code>.
        </p>
      </PageHeader>
      {s.loading ? <Loading /> : null}
      <ErrorBox error={s.error} retry={s.reload} />
      {s.data ? (
        <>
          <h2>Site limits</h2>
          <div className="table-wrap card">
            <table className="table" aria-label="Site limits">
              <thead>
                <tr>
                  <th scope="col">Site</th>
                  <th scope="col">MX hosts</th>
                  {FIELDS.map(([f, label]) => (
                    <th scope="col" key={f}>
                      {label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {s.data.sites.map((row) => (
                  <tr key={row.site} data-testid={`site-${row.site}`}>
                    <td>{row.site}</td>
                    <td className="muted small">{row.mx.length ? row.mx.join(', ') : 'every other host'}</td>
                    {FIELDS.map(([f]) => (
                      <Cell key={f} row={row} field={f} />
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <h2>Suspensions</h2>
          {s.data.suspensions.length === 0 ? (
            <Empty title="Nothing suspended">
              <p>
                A receiver's complaint code (Yahoo TSS04, Microsoft S3150, Gmail 4.7.28) pauses or slows one address.
              </p>
            </Empty>
          ) : (
            <div className="table-wrap card">
              <table className="table" aria-label="Suspensions">
                <thead>
                  <tr>
                    <th scope="col">Site</th>
                    <th scope="col">Source address</th>
                    <th scope="col">Rule</th>
                    <th scope="col">Until</th>
                    <th scope="col">Reason</th>
                  </tr>
                </thead>
                <tbody>
                  {s.data.suspensions.map((r) => (
                    <tr key={`${r.site}-${r.source_address ?? ''}`} data-testid={`suspension-${r.site}`}>
                      <td>{r.site}</td>
                      <td>{r.source_address ?? 'default route'}</td>
                      <td>
                        {r.rule} <Badge tone="warn">{r.action === 'slow' ? `slowed x${r.factor}` : 'suspended'}</Badge>
                      </td>
                      <td>{new Date(r.until).toLocaleString('en')}</td>
                      <td className="muted small">{r.reason}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      ) : null}
    </>
  );
}
