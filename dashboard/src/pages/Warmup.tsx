import { Badge, Empty, ErrorBox, Loading, PageHeader } from '../components/ui.tsx';
import { api } from '../lib/api.ts';
import { useAsync } from '../lib/hooks.ts';
import { Link } from '../lib/router.tsx';

/** One address of a pool under a warmup policy (src/modules/warmup/progress.ts). */
export interface WarmupRow {
  pool_id: string;
  pool_name: string;
  address: string;
  policy_name: string;
  warmup_day: number;
  progress_day: string | null;
  stage: { day: number; daily_limit: number; hourly_limit: number | null } | null;
  sent_today: number;
  sent_this_hour: number;
  bounced_today: number;
  complained_today: number;
  today: string;
}

export function WarmupTable({ rows, label }: { rows: WarmupRow[]; label: string }) {
  return (
    <div className="table-wrap card">
      <table className="table" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Address</th>
            <th scope="col">Pool</th>
            <th scope="col">Policy</th>
            <th scope="col">Warmup day</th>
            <th scope="col">Sent today / limit</th>
            <th scope="col">This hour / limit</th>
            <th scope="col">Bounces, complaints today</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={`${r.pool_id}-${r.address}`} data-testid={`warmup-${r.address}`}>
              <td>{r.address}</td>
              <td>
                <Link to={`/ip-pools/${r.pool_id}`}>{r.pool_name}</Link>
              </td>
              <td>{r.policy_name}</td>
              <td>
                {r.stage ? `day ${r.warmup_day}` : <Badge tone="ok">warmed up</Badge>}
                {r.progress_day && r.progress_day !== r.today ? (
                  <div className="muted small">moves on with its next send</div>
                ) : null}
              </td>
              <td data-testid="sent-today">
                {r.sent_today} / {r.stage ? r.stage.daily_limit : '—'}
                {r.stage && r.sent_today >= r.stage.daily_limit ? <Badge tone="warn">full</Badge> : null}
              </td>
              <td>
                {r.sent_this_hour} / {r.stage?.hourly_limit ?? '—'}
              </td>
              <td>
                {r.bounced_today}, {r.complained_today}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Warmup progress of every pool address under a warmup policy (docs/ip-pools.md "Warmup"). */
export function Warmup() {
  const s = useAsync(() => api<{ data: WarmupRow[] }>('GET', '/warmup'), []);
  return (
    <>
      <PageHeader title="Warmup">
        <p>
          New addresses send a little more each day, and move on only after a day with few bounces and complaints.
          Counts are per address and UTC day.
        </p>
      </PageHeader>
      {s.loading ? <Loading /> : null}
      <ErrorBox error={s.error} retry={s.reload} />
      {s.data && s.data.data.length === 0 ? (
        <Empty title="No address in warmup">
          <p>
            Attach a warmup policy (<code>/v1/warmup-policies</code>) to a pool address dedicated to your account to
            warm it up; the server's shared addresses are warmed by its operator.
          </p>
        </Empty>
      ) : null}
      {s.data && s.data.data.length > 0 ? <WarmupTable rows={s.data.data} label="Warmup progress" /> : null}
    </>
  );
}
