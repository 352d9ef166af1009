import { Badge, Empty, ErrorBox, LoadMore, Loading, PageHeader, Time } from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { useAsync, usePaged } from '../lib/hooks.ts';
import { Link } from '../lib/router.tsx';
import { WarmupTable, type WarmupRow } from './Warmup.tsx';

/** Why an address is not used as it stands (docs/ip-pools.md "For the operator", Flags). */
type AddressFlag = 'not_configured' | 'dedicated_to_another_tenant' | 'warmup_policy_ignored';

const FLAG_TEXT: Record<AddressFlag, string> = {
  not_configured: 'not configured on the server: not used',
  dedicated_to_another_tenant: 'dedicated to another account: skipped',
  warmup_policy_ignored: 'shared address: your warmup policy does not apply',
};

/** A pool as /dashboard/api/ip-pools answers it (the /v1/ip-pools shape, docs/api.md "IP pools"). */
export interface IpPool {
  id: string;
  name: string;
  addresses: { address: string; weight: number; warmup_policy_id: string | null; flags: AddressFlag[] }[];
  overflow_pool_id: string | null;
  default: boolean;
  mail_types: string[];
  created_at: string;
  updated_at: string;
}

function Roles({ pool }: { pool: IpPool }) {
  return (
    <>
      {pool.default ? <Badge tone="info">default</Badge> : null}
      {pool.mail_types.map((t) => (
        <Badge key={t} tone="muted">
          {t}
        </Badge>
      ))}
    </>
  );
}

/** The tenant's IP pools (read-only: pools are managed through /v1/ip-pools, docs/ip-pools.md). */
export function IpPools() {
  const list = usePaged((cursor) => api<Page<IpPool>>('GET', `/ip-pools${query({ limit: 50, cursor })}`), []);
  const names = new Map(list.items.map((p) => [p.id, p.name]));
  return (
    <>
      <PageHeader title="IP pools">
        <p>
          Which of the server's addresses your mail leaves from. Create and change pools with the API (
          <code>/v1/ip-pools</code>); a transmission picks one with <code>options.ip_pool</code>.
        </p>
      </PageHeader>
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No IP pools yet">
          <p>Without a pool, mail leaves from the server's shared addresses.</p>
        </Empty>
      ) : null}
      {list.items.length > 0 ? (
        <div className="table-wrap card">
          <table className="table" aria-label="IP pools">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Addresses (weight)</th>
                <th scope="col">Used for</th>
                <th scope="col">Overflow</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((p) => (
                <tr key={p.id}>
                  <td>
                    <Link to={`/ip-pools/${p.id}`}>{p.name}</Link>
                  </td>
                  <td>{p.addresses.map((a) => `${a.address} (${a.weight})`).join(', ')}</td>
                  <td>
                    <Roles pool={p} />
                  </td>
                  <td>{p.overflow_pool_id ? (names.get(p.overflow_pool_id) ?? p.overflow_pool_id) : '—'}</td>
                  <td>
                    <Time iso={p.updated_at} relative />
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

/** One pool: its addresses and their warmup progress today. */
export function IpPoolPage({ id }: { id: string }) {
  const s = useAsync(() => api<{ pool: IpPool; warmup: WarmupRow[] }>('GET', `/ip-pools/${id}`), [id]);
  if (s.loading) return <Loading />;
  if (s.error || !s.data) return <ErrorBox error={s.error} retry={s.reload} />;
  const { pool, warmup } = s.data;
  return (
    <>
      <PageHeader title={pool.name}>
        <p>
          <Roles pool={pool} />
        </p>
      </PageHeader>
      <div className="table-wrap card">
        <table className="table" aria-label="Addresses">
          <thead>
            <tr>
              <th scope="col">Address</th>
              <th scope="col">Weight</th>
              <th scope="col">Warmup</th>
              <th scope="col">Notes</th>
            </tr>
          </thead>
          <tbody>
            {pool.addresses.map((a) => (
              <tr key={a.address}>
                <td>{a.address}</td>
                <td>{a.weight}</td>
                <td>
                  {a.warmup_policy_id && !a.flags.includes('warmup_policy_ignored') ? (
                    <Badge tone="warn">in warmup</Badge>
                  ) : (
                    <Badge tone="ok">no policy</Badge>
                  )}
                </td>
                <td>{a.flags.map((f) => FLAG_TEXT[f]).join('; ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {pool.overflow_pool_id ? (
        <p>
          When every address is at its warmup cap, mail overflows into{' '}
          <Link to={`/ip-pools/${pool.overflow_pool_id}`}>the overflow pool</Link>.
        </p>
      ) : null}
      {warmup.length > 0 ? <WarmupTable rows={warmup} label="Warmup progress" /> : null}
    </>
  );
}
