import { type FormEvent, useState } from 'react';
import { EVENT_TYPES } from '../../../src/modules/events/events.types.ts';
import { Empty, ErrorBox, LoadMore, Loading, PageHeader, StatusBadge, Time } from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { eventSummary, truncate } from '../lib/format.ts';
import { usePaged } from '../lib/hooks.ts';
import { Link, navigate, useLocation } from '../lib/router.tsx';
import type { EventItem } from '../lib/types.ts';

const FILTERS = ['type', 'recipient', 'message_id', 'transmission_id', 'tag', 'from', 'to'] as const;
type Filters = Record<(typeof FILTERS)[number], string>;

/** Dates in the form are UTC days; the API wants instants (from inclusive, to exclusive). */
function toApi(f: Filters): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of FILTERS) if (f[k].trim()) out[k] = f[k].trim();
  if (out.from) out.from = `${out.from}T00:00:00Z`;
  if (out.to) out.to = new Date(Date.parse(`${out.to}T00:00:00Z`) + 86_400_000).toISOString();
  return out;
}

export function Activity() {
  const loc = useLocation();
  const applied = Object.fromEntries(FILTERS.map((k) => [k, loc.search.get(k) ?? ''])) as Filters;
  const [form, setForm] = useState<Filters>(applied);
  const key = loc.search.toString();
  const page = usePaged(
    (cursor) => api<Page<EventItem>>('GET', `/events${query({ ...toApi(applied), limit: 50, cursor })}`),
    [key],
  );

  const apply = (e: FormEvent) => {
    e.preventDefault();
    const q = query(Object.fromEntries(FILTERS.map((k) => [k, form[k].trim()])));
    navigate(`/activity${q}`);
  };
  const clear = () => {
    setForm(Object.fromEntries(FILTERS.map((k) => [k, ''])) as Filters);
    navigate('/activity');
  };
  const events = page.items;
  const field = (k: keyof Filters, label: string, type = 'text', placeholder = '') => (
    <div className="field">
      <label htmlFor={`f-${k}`}>{label}</label>
      <input
        id={`f-${k}`}
        type={type}
        value={form[k]}
        placeholder={placeholder}
        onChange={(e) => setForm({ ...form, [k]: e.target.value })}
      />
    </div>
  );

  return (
    <>
      <PageHeader title="Activity">
        <p>Every event of your mail, newest first. Open a message to see each delivery attempt.</p>
      </PageHeader>
      <form className="filters" onSubmit={apply} aria-label="Filter events">
        <div className="field">
          <label htmlFor="f-type">Event type</label>
          <select id="f-type" value={form.type} onChange={(e) => setForm({ ...form, type: e.target.value })}>
            <option value="">All types</option>
            {EVENT_TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </div>
        {field('recipient', 'Recipient', 'email', 'ann@example.com')}
        {field('message_id', 'Message ID')}
        {field('transmission_id', 'Transmission ID')}
        {field('tag', 'Tag')}
        {field('from', 'From (UTC day)', 'date')}
        {field('to', 'To (UTC day)', 'date')}
        <div className="filter-actions">
          <button type="submit" className="btn btn-primary">
            Apply filters
          </button>
          <button type="button" className="btn" onClick={clear}>
            Clear
          </button>
        </div>
      </form>
      {page.loading ? <Loading /> : null}
      <ErrorBox error={page.error} retry={page.reload} />
      {!page.loading && !page.error && events.length === 0 ? (
        <Empty title={key ? 'No events match these filters' : 'No events yet'}>
          {key ? (
            <p>Try a wider time range or clear the filters.</p>
          ) : (
            <p>Events appear here as soon as mail is sent.</p>
          )}
        </Empty>
      ) : null}
      {events.length > 0 ? (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Event</th>
                <th scope="col">Recipient</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {events.map((ev) => (
                <tr key={ev.id}>
                  <td className="nowrap">
                    <Time iso={ev.created_at} />
                  </td>
                  <td>
                    <StatusBadge status={ev.type} />
                  </td>
                  <td className="break">
                    {ev.message_id ? (
                      <Link to={`/messages/${ev.message_id}`}>{ev.recipient ?? ev.message_id}</Link>
                    ) : (
                      (ev.recipient ?? '–')
                    )}
                  </td>
                  <td className="break">
                    {truncate(eventSummary(ev.type, ev.data), 160)}
                    {ev.tags.length ? <span className="tags"> {ev.tags.map((t) => `#${t}`).join(' ')}</span> : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <LoadMore cursor={page.cursor} loading={page.loadingMore} onMore={page.loadMore} />
    </>
  );
}
