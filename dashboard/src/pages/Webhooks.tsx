import { useState } from 'react';
import { Empty, ErrorBox, LoadMore, Loading, PageHeader, SecretOnce } from '../components/ui.tsx';
import { api, type Page, query } from '../lib/api.ts';
import { useAction, usePaged } from '../lib/hooks.ts';
import type { Webhook } from '../lib/types.ts';
import { WebhookCard } from './WebhookCard.tsx';
import { type WebhookInput, WebhookForm } from './WebhookForm.tsx';

export function Webhooks() {
  const list = usePaged((cursor) => api<Page<Webhook>>('GET', `/webhooks${query({ limit: 50, cursor })}`), []);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<(Webhook & { secret: string }) | null>(null);
  const create = useAction(async (input: WebhookInput) => {
    const body: Partial<WebhookInput> = { ...input };
    if (!body.name) delete body.name;
    if (input.dispatch_policy === 'single') {
      delete body.batch_max_size;
      delete body.batch_max_wait_ms;
    }
    const hook = await api<Webhook & { secret: string }>('POST', '/webhooks', body);
    setCreated(hook);
    setCreating(false);
    list.update((items) => [...items, hook]);
  });

  return (
    <>
      <PageHeader title="Webhooks">
        <p>
          Postyard POSTs events (deliveries, bounces, complaints…) to your endpoints, signed with the{' '}
          <a href="https://www.standardwebhooks.com/" rel="noreferrer" target="_blank">
            Standard Webhooks
          </a>{' '}
          scheme. Failed deliveries are retried for about 3 days.
        </p>
      </PageHeader>
      {created ? (
        <SecretOnce
          title={`Signing secret of “${created.name}”`}
          value={created.secret}
          onDone={() => setCreated(null)}
        />
      ) : null}
      {creating ? (
        <section className="card" aria-labelledby="new-hook">
          <h2 id="new-hook">Add a webhook</h2>
          <WebhookForm
            submitLabel="Add webhook"
            busy={create.busy}
            error={create.error}
            onSubmit={(input) => void create.run(input)}
            onCancel={() => {
              setCreating(false);
              create.clearError();
            }}
          />
        </section>
      ) : (
        <div className="button-row">
          <button type="button" className="btn btn-primary" onClick={() => setCreating(true)}>
            Add webhook
          </button>
        </div>
      )}
      {list.loading ? <Loading /> : null}
      <ErrorBox error={list.error} retry={list.reload} />
      {!list.loading && !list.error && list.items.length === 0 && !creating ? (
        <Empty title="No webhooks">
          <p>Add an endpoint to hear about deliveries, bounces and complaints as they happen.</p>
        </Empty>
      ) : null}
      {list.items.map((h) => (
        <WebhookCard
          key={h.id}
          hook={h}
          onChanged={(nh) => list.update((items) => items.map((x) => (x.id === nh.id ? nh : x)))}
          onDeleted={() => list.update((items) => items.filter((x) => x.id !== h.id))}
        />
      ))}
      <LoadMore cursor={list.cursor} loading={list.loadingMore} onMore={list.loadMore} />
    </>
  );
}
