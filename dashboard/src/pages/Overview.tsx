import { type Bucket, LineChart } from '../components/Chart.tsx';
import { Empty, ErrorBox, Loading, PageHeader } from '../components/ui.tsx';
import { api } from '../lib/api.ts';
import { formatNumber, formatPercent } from '../lib/format.ts';
import { useAsync } from '../lib/hooks.ts';
import { Link, navigate, useLocation } from '../lib/router.tsx';
import type { Session, Stats } from '../lib/types.ts';

const RANGES = [
  ['24h', 'Last 24 hours'],
  ['7d', 'Last 7 days'],
  ['30d', 'Last 30 days'],
] as const;

const VOLUME = [
  { key: 'sent', label: 'Sent', color: '#2563eb' },
  { key: 'delivered', label: 'Delivered', color: '#059669' },
];
// People solid colours, machines (privacy proxies, link scanners) the same hue lighter.
const ENGAGEMENT = [
  { key: 'opens', label: 'Opens (people)', color: '#0891b2' },
  { key: 'opens_machine', label: 'Opens (machines)', color: '#67e8f9' },
  { key: 'clicks', label: 'Clicks (people)', color: '#c2410c' },
  { key: 'clicks_machine', label: 'Clicks (machines)', color: '#fdba74' },
];
const PROBLEMS = [
  { key: 'deferred', label: 'Deferred', color: '#d97706' },
  { key: 'bounced', label: 'Bounced', color: '#dc2626' },
  { key: 'complaints', label: 'Complaints', color: '#7c3aed' },
];

export function Overview({ session }: { session: Session }) {
  const loc = useLocation();
  const range = RANGES.find(([r]) => r === loc.search.get('range'))?.[0] ?? '7d';
  const stats = useAsync(() => api<Stats>('GET', `/stats?range=${range}`), [range]);
  const s = stats.data;
  const cards: [string, string, string?][] = s
    ? [
        ['Sent', formatNumber(s.totals.sent)],
        ['Delivered', formatNumber(s.totals.delivered)],
        ['Deferred', formatNumber(s.totals.deferred)],
        ['Bounced', formatNumber(s.totals.bounced)],
        ['Complaints', formatNumber(s.totals.complaints)],
        ['Opens', formatNumber(s.totals.opens), `people; ${formatNumber(s.totals.opens_machine)} more by machines`],
        ['Clicks', formatNumber(s.totals.clicks), `people; ${formatNumber(s.totals.clicks_machine)} more by machines`],
        ['Delivery rate', formatPercent(s.delivery_rate), 'delivered ÷ (delivered + bounced + failed)'],
      ]
    : [];
  const quiet = s && Object.values(s.totals).every((v) => v === 0);

  return (
    <>
      <PageHeader title="Overview">
        <p>Mail sent by {session.tenant.name}, in UTC.</p>
      </PageHeader>
      {!session.user.has_password ? (
        <div className="alert alert-info" role="status">
          You signed in with a one-time link. <Link to="/settings/account">Set a password</Link> to sign in again later.
        </div>
      ) : null}
      <fieldset className="segmented">
        <legend className="visually-hidden">Period</legend>
        {RANGES.map(([r, label]) => (
          <button
            key={r}
            type="button"
            className={`btn btn-small${r === range ? ' active' : ''}`}
            aria-pressed={r === range}
            onClick={() => navigate(`/?range=${r}`, { replace: true })}
          >
            {label}
          </button>
        ))}
      </fieldset>
      {stats.loading && !s ? <Loading /> : null}
      <ErrorBox error={stats.error} retry={stats.reload} />
      {s ? (
        <>
          <dl className="stat-cards">
            {cards.map(([label, value, hint]) => (
              <div className="stat-card" key={label}>
                <dt>{label}</dt>
                <dd>{value}</dd>
                {hint ? <dd className="hint">{hint}</dd> : null}
              </div>
            ))}
          </dl>
          {quiet ? (
            <Empty title="No mail in this period">
              <p>
                Send your first message with an <Link to="/settings/api-keys">API key</Link> or{' '}
                <Link to="/settings/smtp">SMTP credentials</Link>; it shows up here and in{' '}
                <Link to="/activity">Activity</Link>.
              </p>
            </Empty>
          ) : null}
          <div className="charts">
            <LineChart title="Sent and delivered" buckets={s.buckets as Bucket[]} series={VOLUME} bucket={s.bucket} />
            <LineChart
              title="Deferred, bounced and complaints"
              buckets={s.buckets as Bucket[]}
              series={PROBLEMS}
              bucket={s.bucket}
            />
            <LineChart
              title="Opens and clicks, people and machines"
              buckets={s.buckets as Bucket[]}
              series={ENGAGEMENT}
              bucket={s.bucket}
            />
          </div>
        </>
      ) : null}
    </>
  );
}
