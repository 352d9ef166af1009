import type { Database } from '../../db/index.ts';
import { isoAt } from '../../lib/clock.ts';
import { normalizeEmail } from '../../lib/email.ts';
import { AppError } from '../../lib/errors.ts';
import { isUuid } from '../../lib/ids.ts';
import { type CursorCodec, type Page, toPage } from '../../lib/pagination.ts';
import { toEventView } from './events.repo.ts';
import { deleteEvents, type EventFilter, expiredEventIds, listEvents } from './events.query.ts';
import { EVENT_TYPES, type EventView } from './events.types.ts';
import { dropExpiredPartitions, ensurePartitions } from '../../db/event-partitions.ts';

/** Raw query parameters of GET /v1/events (already limited in length by the route schema). */
export interface EventsQueryInput {
  limit: number;
  cursor?: string;
  type?: string;
  recipient?: string;
  transmission_id?: string;
  message_id?: string;
  tag?: string;
  from?: string;
  to?: string;
}

// A date, or a date-time with an explicit zone: a zone-less time would be read as server-local.
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/;

function bad(field: string, message: string): AppError {
  return new AppError('invalid_parameter', message, { field });
}

function parseTime(field: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (!ISO_TIME.test(value) || Number.isNaN(ms)) {
    throw bad(field, `${field} must be an ISO-8601 time with a zone, like 2026-11-22T10:00:00Z`);
  }
  return isoAt(ms);
}

/** Validates and normalizes the query; every problem is a 400 invalid_parameter naming the field. */
export function parseEventsQuery(q: EventsQueryInput, cursors: CursorCodec): EventFilter {
  const f: EventFilter = { limit: q.limit, types: [] };
  if (q.type !== undefined) {
    const types = [...new Set(q.type.split(',').map((t) => t.trim()))];
    for (const t of types) {
      if (!(EVENT_TYPES as readonly string[]).includes(t)) {
        throw bad('type', `unknown event type ${JSON.stringify(t)}; known: ${EVENT_TYPES.join(', ')}`);
      }
    }
    f.types = types;
  }
  if (q.recipient !== undefined) {
    if (!q.recipient.trim()) throw bad('recipient', 'recipient must not be empty');
    f.recipient = normalizeEmail(q.recipient);
  }
  for (const [field, value] of [
    ['transmission_id', q.transmission_id],
    ['message_id', q.message_id],
  ] as const) {
    if (value !== undefined && !isUuid(value)) throw bad(field, `${field} must be a UUID`);
  }
  if (q.transmission_id !== undefined) f.transmissionId = q.transmission_id.toLowerCase();
  if (q.message_id !== undefined) f.messageId = q.message_id.toLowerCase();
  if (q.tag !== undefined) {
    if (q.tag.length < 1 || q.tag.length > 64) throw bad('tag', 'tag must be 1-64 characters');
    f.tag = q.tag;
  }
  const from = parseTime('from', q.from);
  const to = parseTime('to', q.to);
  if (from && to && from > to) throw bad('from', 'from must not be after to');
  if (from) f.from = from;
  if (to) f.to = to;
  if (q.cursor !== undefined) {
    const id = cursors.decode(q.cursor).id;
    if (typeof id !== 'string' || !isUuid(id)) {
      throw new AppError('invalid_cursor', 'The cursor is not valid', { field: 'cursor' });
    }
    f.beforeId = id;
  }
  return f;
}

export interface RetentionResult {
  events: number;
  deliveries: number;
  /** PostgreSQL: whole days dropped (their partitions), as YYYY-MM-DD. */
  days?: string[];
  /** PostgreSQL: day partitions created ahead. */
  created?: number;
}

/**
 * The events API and event retention. Events are written by the modules whose changes they
 * report (insertEvents), so this service only reads and expires them.
 */
export class EventsService {
  constructor(
    private readonly database: Database,
    private readonly cursors: CursorCodec,
  ) {}

  async list(tenantId: string, q: EventsQueryInput): Promise<Page<EventView>> {
    const filter = parseEventsQuery(q, this.cursors);
    const rows = await listEvents(this.database.db, tenantId, filter);
    return toPage(rows, filter.limit, this.cursors, toEventView);
  }

  /**
   * Deletes events older than `retentionDays` (and webhook delivery logs as old), in chunks so a
   * large backlog never holds the SQLite writer for long. Events a webhook still has to deliver
   * stay until their delivery ends. `maxRows` bounds one run; the next run continues.
   */
  async purgeExpired(
    retentionDays: number,
    opts: { now?: number; chunk?: number; maxRows?: number } = {},
  ): Promise<RetentionResult> {
    const db = this.database.db;
    const cutoff = isoAt((opts.now ?? Date.now()) - retentionDays * 86_400_000);
    const chunk = opts.chunk ?? 2000;
    const maxRows = opts.maxRows ?? 500_000;
    const out: RetentionResult = { events: 0, deliveries: 0 };
    // PostgreSQL: the days ahead exist before their first insert, and whole expired days go as
    // one DROP each; the rows left (a day still needed by a webhook, the default partition) are
    // deleted below like on SQLite.
    const created = await ensurePartitions(db, opts.now ?? Date.now());
    if (created) out.created = created;
    const days = await dropExpiredPartitions(db, cutoff);
    if (days.length) out.days = days;
    while (out.events < maxRows) {
      const ids = await expiredEventIds(db, cutoff, chunk);
      if (ids.length === 0) break;
      await db.transaction().execute((trx) => deleteEvents(trx, ids));
      out.events += ids.length;
      if (ids.length < chunk) break;
      await new Promise((r) => setImmediate(r));
    }
    while (out.deliveries < maxRows) {
      const res = await db
        .deleteFrom('webhook_deliveries')
        .where('id', 'in', (eb) =>
          eb.selectFrom('webhook_deliveries').select('id').where('created_at', '<', cutoff).limit(chunk),
        )
        .executeTakeFirst();
      const n = Number(res.numDeletedRows);
      out.deliveries += n;
      if (n < chunk) break;
      await new Promise((r) => setImmediate(r));
    }
    return out;
  }
}
