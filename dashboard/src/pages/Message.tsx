import { Empty, ErrorBox, Loading, PageHeader, StatusBadge, Time } from '../components/ui.tsx';
import { ApiError, api, type Page, query } from '../lib/api.ts';
import { eventSummary, formatNumber } from '../lib/format.ts';
import { useAsync } from '../lib/hooks.ts';
import { Link } from '../lib/router.tsx';
import type { Attempt, EventItem, Message } from '../lib/types.ts';

function AttemptCard({ a }: { a: Attempt }) {
  return (
    <article className="card attempt" aria-labelledby={`attempt-${a.attempt}`}>
      <header className="card-header">
        <h3 id={`attempt-${a.attempt}`}>Attempt {a.attempt}</h3>
        <StatusBadge status={a.outcome} />
      </header>
      <dl className="props">
        <dt>Started</dt>
        <dd>
          <Time iso={a.started_at} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <Time iso={a.finished_at} />
        </dd>
        <dt>MX host</dt>
        <dd>{a.mx_host ?? '–'}</dd>
        <dt>Address</dt>
        <dd>{a.address ?? '–'}</dd>
        <dt>TLS</dt>
        <dd>{a.tls ? 'Yes (STARTTLS)' : 'No'}</dd>
        <dt>Reply</dt>
        <dd className="break">
          {[a.smtp_code, a.enhanced_code].filter((x) => x !== null).join(' ')} {a.response ?? ''}
        </dd>
      </dl>
      {a.transcript ? (
        <details className="transcript">
          <summary>SMTP transcript</summary>
          <pre>{a.transcript}</pre>
        </details>
      ) : (
        <p className="muted">No transcript was recorded for this attempt.</p>
      )}
    </article>
  );
}

export function MessagePage({ id }: { id: string }) {
  const msg = useAsync(() => api<Message>('GET', `/messages/${encodeURIComponent(id)}`), [id]);
  const events = useAsync(
    () => api<Page<EventItem>>('GET', `/events${query({ message_id: id, limit: 100 })}`).catch(() => null),
    [id],
  );
  const m = msg.data;
  if (msg.error instanceof ApiError && msg.error.status === 404) {
    return (
      <>
        <PageHeader title="Message not found" />
        <Empty title="There is no message with this id in your account">
          <p>
            Back to <Link to="/activity">Activity</Link>.
          </p>
        </Empty>
      </>
    );
  }
  return (
    <>
      <PageHeader title="Message">
        <p className="break">
          <Link to="/activity">Activity</Link> / {id}
        </p>
      </PageHeader>
      {msg.loading ? <Loading /> : null}
      <ErrorBox error={msg.error} retry={msg.reload} />
      {m ? (
        <>
          <section className="card">
            <dl className="props">
              <dt>Recipient</dt>
              <dd className="break">{m.recipient_name ? `${m.recipient_name} <${m.recipient}>` : m.recipient}</dd>
              <dt>Addressed as</dt>
              <dd>{m.role === 'bcc' ? 'Bcc (in no header)' : m.role === 'cc' ? 'Cc' : 'To'}</dd>
              <dt>State</dt>
              <dd>
                <StatusBadge status={m.state} />
              </dd>
              <dt>Attempts</dt>
              <dd>{m.attempt_count}</dd>
              {m.next_attempt_at ? (
                <>
                  <dt>Next attempt</dt>
                  <dd>
                    <Time iso={m.next_attempt_at} />
                  </dd>
                </>
              ) : null}
              <dt>Last reply</dt>
              <dd className="break">{m.last_response ?? '–'}</dd>
              <dt>Accepted</dt>
              <dd>
                <Time iso={m.created_at} />
              </dd>
              <dt>Transmission</dt>
              <dd className="break">
                <Link to={`/activity?transmission_id=${m.transmission_id}`}>{m.transmission_id}</Link>
              </dd>
              {Object.keys(m.metadata).length ? (
                <>
                  <dt>Metadata</dt>
                  <dd className="break">
                    {Object.entries(m.metadata)
                      .map(([k, v]) => `${k}=${v}`)
                      .join(', ')}
                  </dd>
                </>
              ) : null}
            </dl>
          </section>
          {m.engagement ? (
            <section className="card" aria-labelledby="engagement">
              <h2 id="engagement">Opens and clicks</h2>
              <dl className="props">
                <dt>Opens</dt>
                <dd data-testid="opens">
                  {formatNumber(m.engagement.opens.people)} by people, {formatNumber(m.engagement.opens.machines)} by
                  machines
                </dd>
                <dt>Clicks</dt>
                <dd data-testid="clicks">
                  {formatNumber(m.engagement.clicks.people)} by people, {formatNumber(m.engagement.clicks.machines)} by
                  machines
                </dd>
              </dl>
              <p className="hint">
                Machines are mail-privacy proxies and link scanners (Apple Mail Privacy Protection, Gmail's image proxy,
                security gateways): they fetch images and follow links without a person reading.
              </p>
            </section>
          ) : null}
          <h2>Delivery attempts</h2>
          {m.attempts.length === 0 ? (
            <Empty title="No delivery attempt yet">
              <p>The message is {m.state}. Attempts appear here with their SMTP transcript.</p>
            </Empty>
          ) : (
            m.attempts.map((a) => <AttemptCard key={a.attempt} a={a} />)
          )}
          <h2>Events</h2>
          {events.data?.data.length ? (
            <ol className="timeline">
              {events.data.data.map((ev) => (
                <li key={ev.id}>
                  <Time iso={ev.created_at} /> <StatusBadge status={ev.type} />{' '}
                  <span className="break">{eventSummary(ev.type, ev.data)}</span>
                </li>
              ))}
            </ol>
          ) : events.loading ? (
            <Loading />
          ) : (
            <p className="muted">No events.</p>
          )}
        </>
      ) : null}
    </>
  );
}
