import { ENDPOINTS, type EndpointName, fillPath, KEYED_POSTS, UNKEYED_POSTS } from './endpoints.ts';
import type { HttpClient, RequestOptions } from './http.ts';
import type {
  ApiPath,
  ListFilters,
  Page,
  QueryParams,
  RequestBody,
  ResponseBody,
  SuppressionImportResult,
  SuppressionUpsertResult,
} from './types.ts';

export type Ep<N extends EndpointName> = (typeof ENDPOINTS)[N];
export type Res<N extends EndpointName> = ResponseBody<Ep<N>[1], Ep<N>[0]>;
export type Body<N extends EndpointName> = RequestBody<Ep<N>[1], Ep<N>[0]>;
export type Query<N extends EndpointName> = QueryParams<Ep<N>[1], Ep<N>[0]>;
export type Filters<N extends EndpointName> = Ep<N>[1] extends ApiPath ? ListFilters<Ep<N>[1]> : never;
type Item<N extends EndpointName> = Res<N> extends Page<infer T> ? T : never;

/** Options of an import: the server refuses Idempotency-Key there (imports are upserts, safe to repeat). */
export type ImportOptions = Omit<RequestOptions, 'idempotencyKey'> & { filename?: string };

/**
 * Walks every page of a list, following next_cursor until it is null. Cursors are keyset
 * cursors on the server, so items inserted while iterating never shift or repeat what comes next.
 */
export async function* paginate<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T> {
  let cursor: string | undefined;
  do {
    const page = await fetchPage(cursor);
    for (const item of page.data) yield item;
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
}

export abstract class Resource {
  constructor(protected readonly http: HttpClient) {}

  protected call<N extends EndpointName>(
    name: N,
    args: { id?: string; params?: Record<string, string>; query?: object | undefined; json?: unknown; form?: FormData },
    opts?: RequestOptions,
  ): Promise<Res<N>> {
    const [method, path] = ENDPOINTS[name];
    const keyed = KEYED_POSTS.has(name) && args.form === undefined;
    // `{id}` from `id`; other path parameters (`{site}`) from `params`.
    const params = args.id === undefined ? args.params : { ...args.params, id: args.id };
    return this.http.request<Res<N>>(
      {
        method,
        path: params === undefined ? path : fillPath(path, params),
        query: args.query as Record<string, unknown> | undefined,
        json: args.json,
        ...(args.form ? { form: args.form } : {}),
        retry: UNKEYED_POSTS[name] ?? 'repeatable',
        idempotent: keyed,
      },
      opts,
    );
  }

  protected pages<N extends EndpointName>(
    name: N,
    id: string | undefined,
    filters: object | undefined,
    opts?: RequestOptions,
  ) {
    return paginate<Item<N>>(
      (cursor) =>
        this.call(name, { ...(id === undefined ? {} : { id }), query: { ...filters, cursor } }, opts) as Promise<
          Page<Item<N>>
        >,
    );
  }
}

export class Transmissions extends Resource {
  /** Accepts mail for delivery. 202 means durably stored, not delivered: outcomes arrive as events. */
  send(body: Body<'transmissions.send'>, opts?: RequestOptions) {
    return this.call('transmissions.send', { json: body }, opts);
  }
  /** The transmission with each recipient's message id and state. */
  get(id: string, opts?: RequestOptions) {
    return this.call('transmissions.get', { id }, opts);
  }
}

export class Messages extends Resource {
  /** One message with every delivery attempt (MX host, TLS, reply and SMTP transcript). */
  get(id: string, opts?: RequestOptions) {
    return this.call('messages.get', { id }, opts);
  }
}

export class Suppressions extends Resource {
  /** Upserts 1-10,000 items, all or nothing (one bad item: 422 naming items[i]..., nothing written). */
  async upsert(body: Body<'suppressions.upsert'>, opts?: RequestOptions): Promise<SuppressionUpsertResult> {
    return (await this.call('suppressions.upsert', { json: body }, opts)) as SuppressionUpsertResult;
  }
  /**
   * Imports a CSV file (header `identifier,type,reason_category,description`; only identifier is
   * required). Bad rows are skipped and reported by line. Safe to repeat: rows are upserts.
   * A file of many megabytes may need more than the default 30 s: pass `timeoutMs`.
   */
  async import(csv: string | Uint8Array | Blob, opts: ImportOptions = {}): Promise<SuppressionImportResult> {
    const { filename = 'suppressions.csv', ...rest } = opts;
    const blob = csv instanceof Blob ? csv : new Blob([csv], { type: 'text/csv' });
    const form = new FormData();
    form.set('file', blob, filename);
    return (await this.call('suppressions.upsert', { form }, rest)) as SuppressionImportResult;
  }
  list(query?: Query<'suppressions.list'>, opts?: RequestOptions) {
    return this.call('suppressions.list', { query }, opts);
  }
  /** Every suppression matching `filters`: `for await (const s of client.suppressions.iterate({ type: 'email' }))`. */
  iterate(filters?: Filters<'suppressions.list'>, opts?: RequestOptions) {
    return this.pages('suppressions.list', undefined, filters, opts);
  }
  get(id: string, opts?: RequestOptions) {
    return this.call('suppressions.get', { id }, opts);
  }
  /** Deletes it (sending to it is allowed again). */
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('suppressions.delete', { id }, opts);
  }
}

export class Webhooks extends Resource {
  /** Creates a webhook; the answer's `secret` is shown this once (null in idempotent replays). */
  create(body: Body<'webhooks.create'>, opts?: RequestOptions) {
    return this.call('webhooks.create', { json: body }, opts);
  }
  list(query?: Query<'webhooks.list'>, opts?: RequestOptions) {
    return this.call('webhooks.list', { query }, opts);
  }
  iterate(filters?: Filters<'webhooks.list'>, opts?: RequestOptions) {
    return this.pages('webhooks.list', undefined, filters, opts);
  }
  get(id: string, opts?: RequestOptions) {
    return this.call('webhooks.get', { id }, opts);
  }
  /** Changes any field; `{ enabled: true }` re-activates a disabled webhook. */
  update(id: string, body: Body<'webhooks.update'>, opts?: RequestOptions) {
    return this.call('webhooks.update', { id, json: body }, opts);
  }
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('webhooks.delete', { id }, opts);
  }
  /** A new signing secret; the old one keeps signing beside it for 24 h. Not retried once sent. */
  rotateSecret(id: string, opts?: RequestOptions) {
    return this.call('webhooks.rotateSecret', { id }, opts);
  }
  /** Sends a `webhook.test` event now and reports the outcome. */
  test(id: string, opts?: RequestOptions) {
    return this.call('webhooks.test', { id }, opts);
  }
  /** The attempt log, newest first. */
  deliveries(id: string, query?: Query<'webhooks.deliveries'>, opts?: RequestOptions) {
    return this.call('webhooks.deliveries', { id, query }, opts);
  }
  iterateDeliveries(id: string, filters?: Filters<'webhooks.deliveries'>, opts?: RequestOptions) {
    return this.pages('webhooks.deliveries', id, filters, opts);
  }
}

export class Events extends Resource {
  /** Events newest first; filters combine with AND (`type` takes a comma-separated list). */
  list(query?: Query<'events.list'>, opts?: RequestOptions) {
    return this.call('events.list', { query }, opts);
  }
  iterate(filters?: Filters<'events.list'>, opts?: RequestOptions) {
    return this.pages('events.list', undefined, filters, opts);
  }
}

export class ApiKeys extends Resource {
  /** The raw `key` is in this answer only. Scopes may not exceed the calling key's. */
  create(body: Body<'apiKeys.create'>, opts?: RequestOptions) {
    return this.call('apiKeys.create', { json: body }, opts);
  }
  list(query?: Query<'apiKeys.list'>, opts?: RequestOptions) {
    return this.call('apiKeys.list', { query }, opts);
  }
  iterate(filters?: Filters<'apiKeys.list'>, opts?: RequestOptions) {
    return this.pages('apiKeys.list', undefined, filters, opts);
  }
  /** Revokes the key on every node within a few seconds. */
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('apiKeys.delete', { id }, opts);
  }
}

export class SmtpCredentials extends Resource {
  /** The `password` is in this answer only. */
  create(body: Body<'smtpCredentials.create'>, opts?: RequestOptions) {
    return this.call('smtpCredentials.create', { json: body }, opts);
  }
  list(query?: Query<'smtpCredentials.list'>, opts?: RequestOptions) {
    return this.call('smtpCredentials.list', { query }, opts);
  }
  iterate(filters?: Filters<'smtpCredentials.list'>, opts?: RequestOptions) {
    return this.pages('smtpCredentials.list', undefined, filters, opts);
  }
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('smtpCredentials.delete', { id }, opts);
  }
}

export class SendingDomains extends Resource {
  /** Adds a domain, makes its DKIM key and lists the DNS records to publish. */
  create(body: Body<'sendingDomains.create'>, opts?: RequestOptions) {
    return this.call('sendingDomains.create', { json: body }, opts);
  }
  list(query?: Query<'sendingDomains.list'>, opts?: RequestOptions) {
    return this.call('sendingDomains.list', { query }, opts);
  }
  iterate(filters?: Filters<'sendingDomains.list'>, opts?: RequestOptions) {
    return this.pages('sendingDomains.list', undefined, filters, opts);
  }
  get(id: string, opts?: RequestOptions) {
    return this.call('sendingDomains.get', { id }, opts);
  }
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('sendingDomains.delete', { id }, opts);
  }
  /** Looks the records up in DNS now and updates each record's and the domain's status. */
  verify(id: string, opts?: RequestOptions) {
    return this.call('sendingDomains.verify', { id }, opts);
  }
  /**
   * Sets (`{ tracking_hostname: 'click.example.com' }`) or removes (`null`) the tracking host name:
   * its CNAME joins `dns_records`, pending until the next `verify` finds it.
   */
  update(id: string, body: Body<'sendingDomains.update'>, opts?: RequestOptions) {
    return this.call('sendingDomains.update', { id, json: body }, opts);
  }
}

export class Templates extends Resource {
  /** Saves version 1 of a new template as its draft (nothing is published yet). */
  create(body: Body<'templates.create'>, opts?: RequestOptions) {
    return this.call('templates.create', { json: body }, opts);
  }
  list(query?: Query<'templates.list'>, opts?: RequestOptions) {
    return this.call('templates.list', { query }, opts);
  }
  iterate(filters?: Filters<'templates.list'>, opts?: RequestOptions) {
    return this.pages('templates.list', undefined, filters, opts);
  }
  get(id: string, opts?: RequestOptions) {
    return this.call('templates.get', { id }, opts);
  }
  /** Saves a new draft version; fields not sent are carried over from the latest draft. */
  update(id: string, body: Body<'templates.update'>, opts?: RequestOptions) {
    return this.call('templates.update', { id, json: body }, opts);
  }
  delete(id: string, opts?: RequestOptions): Promise<void> {
    return this.call('templates.delete', { id }, opts);
  }
  /** The draft becomes the published version: sends by `template_id` use it from now on. */
  publish(id: string, opts?: RequestOptions) {
    return this.call('templates.publish', { id }, opts);
  }
  /** Every saved version, newest first. */
  versions(id: string, query?: Query<'templates.versions'>, opts?: RequestOptions) {
    return this.call('templates.versions', { id, query }, opts);
  }
  iterateVersions(id: string, filters?: Filters<'templates.versions'>, opts?: RequestOptions) {
    return this.pages('templates.versions', id, filters, opts);
  }
  /** Renders the published version (or the draft with `draft: true`) with sample data. */
  preview(id: string, body: Body<'templates.preview'>, opts?: RequestOptions) {
    return this.call('templates.preview', { id, json: body }, opts);
  }
}

export class TrackingSettings extends Resource {
  /** The tenant's open and click tracking defaults per mail type (docs/tracking.md). */
  get(opts?: RequestOptions) {
    return this.call('trackingSettings.get', {}, opts);
  }
  /** Changes the defaults; fields not given keep their value. */
  update(body: Body<'trackingSettings.update'>, opts?: RequestOptions) {
    return this.call('trackingSettings.update', { json: body }, opts);
  }
}
