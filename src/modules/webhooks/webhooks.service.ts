import type { Database } from '../../db/index.ts';
import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { WebhookDeliveriesTable, WebhooksTable } from '../../db/schema.ts';
import { isoAt, nowIso } from '../../lib/clock.ts';
import { decryptSecret, encryptSecret } from '../../lib/crypto.ts';
import { notFound, validationError } from '../../lib/errors.ts';
import { isUuid, newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { eventJson } from '../events/events.repo.ts';
import { EVENT_TYPES } from '../events/events.types.ts';
import type { WebhookRegistry } from './registry.ts';
import { newWebhookSecret, secretKey, type WebhookSender } from './sender.ts';
import { checkTargetAddress, checkUrlSyntax } from './ssrf.ts';
import { deleteWebhook, dropQueue, findWebhook, insertWebhook, updateWebhook } from './webhooks.repo.ts';
import type {
  CreatedWebhookView,
  CreateWebhookInput,
  DeliveryView,
  TestResultView,
  UpdateWebhookInput,
  WebhookView,
} from './webhooks.schema.ts';

/** How long a rotated-out secret keeps signing beside the new one (docs/webhooks.md "Rotating the secret"). */
export const PREVIOUS_SECRET_TTL_MS = 24 * 3600_000;

export function toWebhookView(row: WebhooksTable): WebhookView {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    dispatch_policy: row.dispatch_policy,
    batch_max_size: row.batch_max_size,
    batch_max_wait_ms: row.batch_max_wait_ms,
    enabled: row.enabled === 1,
    status: row.status,
    disabled_reason: row.disabled_reason,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function toDeliveryView(row: WebhookDeliveriesTable): DeliveryView {
  return {
    id: row.id,
    webhook_id: row.webhook_id,
    created_at: row.created_at,
    outcome: row.outcome,
    status_code: row.status_code,
    duration_ms: row.duration_ms,
    error: row.error,
    attempt: row.attempt,
    next_attempt_at: row.next_attempt_at,
    batch_id: row.batch_id,
    event_ids: JSON.parse(row.event_ids) as string[],
    test: row.test === 1,
  };
}

/** Subscriptions: known event types, or ["*"] alone. Duplicates are dropped. */
export function validateEventTypes(events: readonly string[]): string[] {
  const errors: { field: string; message: string }[] = [];
  events.forEach((t, i) => {
    if (t !== '*' && !(EVENT_TYPES as readonly string[]).includes(t)) {
      errors.push({ field: `events[${i}]`, message: `events[${i}] is not a known event type: ${JSON.stringify(t)}` });
    }
  });
  if (events.includes('*') && events.length > 1) {
    errors.push({ field: 'events', message: 'events must be ["*"] alone, or a list of event types' });
  }
  if (errors.length) throw validationError(errors);
  return [...new Set(events)];
}

export interface WebhooksServiceOptions {
  /** POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS or dev mode: skip the address check. */
  allowPrivateTargets: boolean;
}

/**
 * Webhook management (docs/api.md "Webhooks"). Transport-free: routes map its AppErrors. Every
 * change invalidates this node's registry at once; other nodes reload within 2 s.
 */
export class WebhooksService {
  constructor(
    private readonly database: Database,
    private readonly cursors: CursorCodec,
    private readonly masterKey: Buffer,
    readonly registry: WebhookRegistry,
    readonly sender: WebhookSender,
    private readonly opts: WebhooksServiceOptions,
  ) {}

  private get db() {
    return this.database.db;
  }

  /** URL syntax, then (unless private targets are allowed) what it resolves to: 422 on `url`. */
  async validateUrl(raw: string): Promise<string> {
    const syntax = checkUrlSyntax(raw.trim());
    if (!syntax.ok || !syntax.url)
      throw validationError([{ field: 'url', message: syntax.message ?? 'url is invalid' }]);
    if (!this.opts.allowPrivateTargets) {
      const target = await checkTargetAddress(syntax.url);
      if (!target.ok) throw validationError([{ field: 'url', message: target.message ?? 'url is not allowed' }]);
    }
    return syntax.url.toString();
  }

  /** Validation (including DNS) runs before `db`'s transaction is used, so it is never held open for it. */
  async prepareCreate(input: CreateWebhookInput): Promise<WebhooksTable & { secret: string }> {
    const events = validateEventTypes(input.events ?? ['*']);
    const url = await this.validateUrl(input.url);
    const secret = newWebhookSecret();
    const now = nowIso();
    const enabled = input.enabled ?? true;
    return {
      tenant_id: '',
      id: newId(),
      name: input.name?.trim() || new URL(url).hostname,
      url,
      events: JSON.stringify(events),
      dispatch_policy: input.dispatch_policy ?? 'single',
      batch_max_size: input.batch_max_size ?? 100,
      batch_max_wait_ms: input.batch_max_wait_ms ?? 1000,
      enabled: enabled ? 1 : 0,
      status: enabled ? 'active' : 'disabled',
      disabled_reason: enabled ? null : 'disabled by API',
      secret_enc: encryptSecret(this.masterKey, secret),
      previous_secret_enc: null,
      previous_secret_expires_at: null,
      failing_since: null,
      last_success_at: null,
      last_failure_at: null,
      created_at: now,
      updated_at: now,
      secret,
    };
  }

  async insertPrepared(
    db: Executor,
    tenantId: string,
    prepared: WebhooksTable & { secret: string },
  ): Promise<CreatedWebhookView> {
    const { secret, ...row } = prepared;
    const full = { ...row, tenant_id: tenantId };
    await insertWebhook(db, full);
    this.registry.invalidate();
    return { ...toWebhookView(full), secret };
  }

  async create(tenantId: string, input: CreateWebhookInput, db: Executor = this.db): Promise<CreatedWebhookView> {
    return this.insertPrepared(db, tenantId, await this.prepareCreate(input));
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<WebhookView>> {
    return newestFirstPage(this.db, 'webhooks', tenantId, { limit, cursor, cursors: this.cursors }, toWebhookView);
  }

  private async row(tenantId: string, id: string): Promise<WebhooksTable> {
    const row = isUuid(id) ? await findWebhook(this.db, tenantId, id) : undefined;
    if (!row) throw notFound('Webhook');
    return row;
  }

  async get(tenantId: string, id: string): Promise<WebhookView> {
    return toWebhookView(await this.row(tenantId, id));
  }

  async update(tenantId: string, id: string, input: UpdateWebhookInput): Promise<WebhookView> {
    const current = await this.row(tenantId, id);
    const set: Partial<WebhooksTable> = { updated_at: nowIso() };
    if (input.events !== undefined) set.events = JSON.stringify(validateEventTypes(input.events));
    if (input.url !== undefined) set.url = await this.validateUrl(input.url);
    if (input.name !== undefined) set.name = input.name.trim() || current.name;
    if (input.dispatch_policy !== undefined) set.dispatch_policy = input.dispatch_policy;
    if (input.batch_max_size !== undefined) set.batch_max_size = input.batch_max_size;
    if (input.batch_max_wait_ms !== undefined) set.batch_max_wait_ms = input.batch_max_wait_ms;
    const enabling = input.enabled === true && current.enabled !== 1;
    const disabling = input.enabled === false && current.enabled === 1;
    if (enabling) {
      // A fresh start: the failure run that may have disabled it no longer counts.
      Object.assign(set, { enabled: 1, status: 'active', disabled_reason: null, failing_since: null });
    } else if (disabling) {
      Object.assign(set, { enabled: 0, status: 'disabled', disabled_reason: 'disabled by API' });
    }
    await this.db.transaction().execute(async (trx) => {
      if (!(await updateWebhook(trx, tenantId, id, set))) throw notFound('Webhook');
      if (disabling) await dropQueue(trx, id);
    });
    this.registry.invalidate();
    return this.get(tenantId, id);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    const ok = isUuid(id) && (await this.db.transaction().execute((trx) => deleteWebhook(trx, tenantId, id)));
    if (!ok) throw notFound('Webhook');
    this.registry.invalidate();
  }

  /** New secret now; the previous one keeps signing beside it for 24 h. */
  async rotateSecret(tenantId: string, id: string): Promise<{ secret: string; previous_secret_expires_at: string }> {
    await this.row(tenantId, id);
    const secret = newWebhookSecret();
    const now = Date.now();
    const expires = isoAt(now + PREVIOUS_SECRET_TTL_MS);
    const res = await this.db
      .updateTable('webhooks')
      .set((eb) => ({
        previous_secret_enc: eb.ref('secret_enc'),
        previous_secret_expires_at: expires,
        secret_enc: encryptSecret(this.masterKey, secret),
        updated_at: isoAt(now),
      }))
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw notFound('Webhook');
    this.registry.invalidate();
    return { secret, previous_secret_expires_at: expires };
  }

  /**
   * Sends one `webhook.test` event to the webhook now, whatever its status or subscriptions,
   * in the webhook's body format, signed like any delivery, and logs the attempt. The event is
   * not stored in the events table: it reports nothing that happened to mail.
   */
  async test(tenantId: string, id: string): Promise<TestResultView> {
    const row = await this.row(tenantId, id);
    const now = Date.now();
    const event = {
      tenant_id: tenantId,
      id: newId(),
      type: 'webhook.test',
      created_at: isoAt(now),
      transmission_id: null,
      message_id: null,
      recipient: null,
      mail_type: null,
      tags: '[]',
      metadata: '{}',
      data: '{}',
    };
    const batchId = row.dispatch_policy === 'batch' ? newId() : null;
    const body = batchId ? `{"batch_id":"${batchId}","events":[${eventJson(event)}]}` : eventJson(event);
    const keys = [secretKey(decryptSecret(this.masterKey, row.secret_enc))];
    if (row.previous_secret_enc && row.previous_secret_expires_at && Date.parse(row.previous_secret_expires_at) > now) {
      keys.push(secretKey(decryptSecret(this.masterKey, row.previous_secret_enc)));
    }
    const res = await this.sender.send({ url: row.url, msgId: batchId ?? event.id, body, keys });
    await this.db
      .insertInto('webhook_deliveries')
      .values({
        tenant_id: tenantId,
        id: newId(),
        webhook_id: id,
        created_at: isoAt(now),
        batch_id: batchId,
        event_ids: JSON.stringify([event.id]),
        attempt: 1,
        outcome: res.ok ? 'delivered' : 'failed',
        status_code: res.statusCode,
        duration_ms: res.durationMs,
        error: res.error,
        next_attempt_at: null,
        test: 1,
      })
      .execute();
    return { delivered: res.ok, status_code: res.statusCode, duration_ms: res.durationMs, error: res.error };
  }

  async deliveries(tenantId: string, id: string, limit: number, cursor?: string): Promise<Page<DeliveryView>> {
    await this.row(tenantId, id);
    const page = { limit, cursor, cursors: this.cursors };
    return newestFirstPage(this.db, 'webhook_deliveries', tenantId, page, toDeliveryView, { webhook_id: id });
  }

  async close(): Promise<void> {
    await this.sender.close();
  }
}
