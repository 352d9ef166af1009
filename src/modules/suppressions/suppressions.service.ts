import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { Database } from '../../db/index.ts';
import { nowIso } from '../../lib/clock.ts';
import { domainOf, normalizeEmail } from '../../lib/email.ts';
import { AppError, notFound, validationError } from '../../lib/errors.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { type CsvRecord, CsvRecordReader } from './csv-reader.ts';
import {
  deleteSuppression,
  findEmailsAndDomains,
  findSuppressionByIdentity,
  getSuppression,
  upsertSuppressions,
} from './suppressions.repo.ts';

import {
  SUPPRESSION_TYPES,
  REASON_CATEGORIES,
  type SuppressionType,
  type ReasonCategory,
  type SuppressionSource,
  type SuppressionScope,
  SUPPRESSION_SCOPES,
  isScope,
  MAX_UPSERT_ITEMS,
  MAX_IMPORT_ROWS,
  MAX_IMPORT_ERRORS,
  MAX_DESCRIPTION_CHARS,
  IMPORT_BATCH_ROWS,
  CSV_COLUMNS,
  type SuppressionView,
  type SuppressionItemInput,
  type NormalizedItem,
  type UpsertResult,
  type ImportResult,
  type SuppressionMatch,
  type ListQuery,
  toView,
  isType,
  isReason,
  checkItem,
  identityKey,
  encode,
  type ColumnIndex,
  parseHeader,
  rowToItem,
} from './suppressions.model.ts';

export * from './suppressions.model.ts';

/**
 * Suppressions: addresses and domains a tenant must not send to (docs/api.md "Suppressions"). Writes are
 * upserts on tenant + type + identifier; the accept path asks `findSuppressed` before queuing.
 */
export class SuppressionsService {
  constructor(
    readonly database: Database,
    readonly cursors: CursorCodec,
  ) {}

  /**
   * Validates and normalizes a JSON batch, all or nothing: any bad item throws one 422 naming
   * every bad field (`items[3].identifier`, first 100). Repeated identities collapse (last wins).
   */
  prepareItems(items: readonly SuppressionItemInput[], source: SuppressionSource = 'api'): NormalizedItem[] {
    if (!Array.isArray(items) || items.length < 1 || items.length > MAX_UPSERT_ITEMS) {
      throw validationError([{ field: 'items', message: `items must hold 1 to ${MAX_UPSERT_ITEMS} entries` }]);
    }
    const errors: { field: string; message: string }[] = [];
    const unique = new Map<string, NormalizedItem>();
    items.forEach((item, i) => {
      const res =
        item && typeof item === 'object' ? checkItem(item, source) : { field: '', message: 'must be an object' };
      if ('field' in res) {
        if (errors.length < MAX_IMPORT_ERRORS) {
          const field = res.field ? `items[${i}].${res.field}` : `items[${i}]`;
          errors.push({ field, message: `${field}: ${res.message}` });
        }
        return;
      }
      const key = identityKey(res.type, res.identifier);
      unique.delete(key); // keep insertion order = last occurrence
      unique.set(key, res);
    });
    if (errors.length) throw validationError(errors);
    return [...unique.values()];
  }

  /** Writes prepared items in the caller's transaction. Counts are per distinct identity. */
  async upsertPrepared(tenantId: string, items: readonly NormalizedItem[], db: Executor): Promise<UpsertResult> {
    const created = await upsertSuppressions(db, tenantId, items.map(encode), nowIso(), { count: true });
    return { created, updated: items.length - created };
  }

  /** prepareItems + upsertPrepared in one transaction (for callers outside HTTP, e.g. the dashboard). */
  async upsert(
    tenantId: string,
    items: readonly SuppressionItemInput[],
    opts: { source?: SuppressionSource; db?: Executor } = {},
  ): Promise<UpsertResult> {
    const prepared = this.prepareItems(items, opts.source ?? 'api');
    if (opts.db) return this.upsertPrepared(tenantId, prepared, opts.db);
    return this.database.db.transaction().execute((trx) => this.upsertPrepared(tenantId, prepared, trx));
  }

  /**
   * Imports a CSV stream (header `identifier,type,reason_category,description[,scope]`; only identifier
   * required). Holds one batch in memory: rows are upserted IMPORT_BATCH_ROWS at a time, each
   * batch in its own transaction, so a failure part-way leaves the earlier batches
   * applied (harmless: an import is an upsert and can simply be repeated). Bad rows are skipped
   * and reported by physical line (header = line 1). Past `maxRows` data rows the import stops,
   * says so in a final error entry, and the rest of the input is read and discarded.
   * A bad header throws 422 before anything is written. Errors of `input` propagate unchanged.
   */
  async importCsv(
    tenantId: string,
    input: AsyncIterable<Buffer | Uint8Array | string>,
    opts: { source?: SuppressionSource; maxRows?: number; batchRows?: number } = {},
  ): Promise<ImportResult> {
    const source = opts.source ?? 'import';
    const maxRows = opts.maxRows ?? MAX_IMPORT_ROWS;
    const batchRows = opts.batchRows ?? IMPORT_BATCH_ROWS;
    const reader = new CsvRecordReader();
    const decoder = new TextDecoder('utf-8');
    const result: ImportResult = { imported: 0, skipped: 0, errors: [] };
    const defaults = { type: 'email', reason_category: 'manual' } as const;
    // Mutated by the closures below (an object, so TypeScript does not narrow it to null).
    const st: { columns: ColumnIndex | null; limitLine: number | null } = { columns: null, limitLine: null };
    let rows = 0;
    // Identity -> encoded row (a string, not an object: see encodeSuppression).
    let batch = new Map<string, string>();
    let batchValid = 0;

    const reject = (line: number, message: string) => {
      result.skipped++;
      if (result.errors.length < MAX_IMPORT_ERRORS) result.errors.push({ line, message });
    };
    const handle = (rec: CsvRecord) => {
      if (!st.columns) {
        st.columns = parseHeader(rec);
        return;
      }
      if (rows >= maxRows) {
        st.limitLine = rec.line;
        return;
      }
      rows++;
      if (!rec.fields) return reject(rec.line, rec.error ?? 'Malformed CSV record');
      const item = rowToItem(rec.fields, st.columns);
      if (typeof item === 'string') return reject(rec.line, item);
      const res = checkItem(item, source, defaults);
      if ('field' in res) return reject(rec.line, res.message);
      batch.set(identityKey(res.type, res.identifier), encode(res));
      batchValid++;
    };
    // Written before reading on (the input waits: backpressure). Overlapping parsing with the
    // write measured no faster and doubles how long a batch stays in memory.
    const flush = async () => {
      if (batch.size === 0) return;
      const rowsToWrite = [...batch.values()];
      const valid = batchValid;
      batch = new Map();
      batchValid = 0;
      await this.database.db
        .transaction()
        .execute((trx) => upsertSuppressions(trx, tenantId, rowsToWrite, nowIso(), { count: false }));
      result.imported += valid;
    };
    // Records are handled as the reader completes them, so none outlives its own row.
    const sink = {
      push(rec: CsvRecord) {
        if (st.limitLine === null) handle(rec);
      },
    };

    for await (const chunk of input) {
      if (st.limitLine !== null) continue; // past the row limit: discard the rest of the upload
      reader.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }), sink);
      if (batch.size >= batchRows) await flush();
    }
    if (st.limitLine === null) {
      reader.feed(decoder.decode(), sink);
      reader.end(sink);
    }
    if (!st.columns) {
      throw validationError([
        { field: 'file', message: `The CSV file is empty; expected a header row ${CSV_COLUMNS.join(',')}` },
      ]);
    }
    await flush();
    if (st.limitLine !== null) {
      // Always reported, even after MAX_IMPORT_ERRORS row errors: it is the one that matters most.
      result.errors.push({
        line: st.limitLine,
        message: `Row limit reached: only the first ${maxRows} rows are processed; this line and the rest of the file were not imported`,
      });
    }
    return result;
  }

  async list(tenantId: string, q: ListQuery): Promise<Page<SuppressionView>> {
    if (q.type !== undefined && !isType(q.type)) {
      throw new AppError('invalid_parameter', `type must be one of ${SUPPRESSION_TYPES.join(', ')}`, { field: 'type' });
    }
    if (q.reason_category !== undefined && !isReason(q.reason_category)) {
      throw new AppError('invalid_parameter', `reason_category must be one of ${REASON_CATEGORIES.join(', ')}`, {
        field: 'reason_category',
      });
    }
    if (q.scope !== undefined && !isScope(q.scope)) {
      throw new AppError('invalid_parameter', `scope must be one of ${SUPPRESSION_SCOPES.join(', ')}`, {
        field: 'scope',
      });
    }
    let type = q.type;
    let identifier: string | undefined;
    if (q.identifier !== undefined) {
      // An email identifier always holds '@' and a domain never does: the shape picks the type
      // (and so the unique index) and the normalization.
      const raw = q.identifier.trim();
      const implied: SuppressionType = raw.includes('@') ? 'email' : 'domain';
      identifier = implied === 'email' ? normalizeEmail(raw) : raw.toLowerCase();
      if (type !== undefined && type !== implied) return { data: [], next_cursor: null };
      type = implied;
    }
    const page = { limit: q.limit, cursor: q.cursor, cursors: this.cursors };
    return newestFirstPage(this.database.db, 'suppressions', tenantId, page, toView, {
      type: type || undefined,
      reason_category: q.reason_category || undefined,
      identifier,
      scope: q.scope || undefined,
    });
  }

  async get(tenantId: string, id: string): Promise<SuppressionView> {
    const row = await getSuppression(this.database.db, tenantId, id);
    if (!row) throw notFound('Suppression');
    return toView(row);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await deleteSuppression(this.database.db, tenantId, id))) throw notFound('Suppression');
  }

  /**
   * For the accept path: which of `emails` the tenant must not send to. An `email` suppression
   * matches the address exactly (domain part case-insensitive, local part exact); a `domain`
   * suppression matches every address at exactly that domain (not its subdomains). Keys of the
   * result are the strings passed in; an email-type match wins over a domain-type one.
   * A `marketing`-scoped suppression applies only when `mailType` is `marketing` (given by the
   * accept path; without it every suppression applies).
   * Costs two chunked IN queries per 1,000 distinct addresses/domains on the unique index.
   */
  async findSuppressed(
    db: Executor,
    tenantId: string,
    emails: readonly string[],
    mailType?: string,
  ): Promise<Map<string, SuppressionMatch>> {
    const byNormalized = new Map<string, string[]>();
    for (const e of emails) {
      const n = normalizeEmail(e);
      const list = byNormalized.get(n);
      if (list) list.push(e);
      else byNormalized.set(n, [e]);
    }
    const result = new Map<string, SuppressionMatch>();
    if (byNormalized.size === 0) return result;
    const domains = new Set<string>();
    for (const n of byNormalized.keys()) domains.add(domainOf(n));
    const { emailRows, domainRows } = await findEmailsAndDomains(db, tenantId, [...byNormalized.keys()], [...domains]);
    const applies = (r: { scope?: string }) =>
      mailType === undefined || mailType === 'marketing' || (r.scope ?? 'all') === 'all';
    const byDomain = new Map(domainRows.filter(applies).map((r) => [r.identifier, r]));
    const byEmail = new Map(emailRows.filter(applies).map((r) => [r.identifier, r]));
    const scopeOf = (r: { scope?: string }): SuppressionScope => (r.scope === 'marketing' ? 'marketing' : 'all');
    for (const [n, originals] of byNormalized) {
      const e = byEmail.get(n);
      const d = e ? undefined : byDomain.get(domainOf(n));
      const match: SuppressionMatch | undefined = e
        ? { id: e.id, reason_category: e.reason_category, type: 'email', scope: scopeOf(e), identifier: e.identifier }
        : d
          ? {
              id: d.id,
              reason_category: d.reason_category,
              type: 'domain',
              scope: scopeOf(d),
              identifier: d.identifier,
            }
          : undefined;
      if (match) for (const o of originals) result.set(o, match);
    }
    return result;
  }

  /**
   * For the bounce, complaint and unsubscribe handlers: upserts one suppression in `db` (their
   * transaction) and returns it. A repeat updates reason, source and description, except that a
   * `marketing` one (an unsubscribe) never narrows an existing `all` entry (a hard bounce stays
   * a block on every mail): that entry is returned unchanged.
   */
  async addAutomatic(
    db: Executor,
    tenantId: string,
    input: {
      identifier: string;
      type?: SuppressionType;
      reason_category: ReasonCategory;
      source: SuppressionSource;
      description?: string | null;
      scope?: SuppressionScope;
    },
  ): Promise<SuppressionView> {
    const res = checkItem(
      {
        identifier: input.identifier,
        type: input.type ?? 'email',
        reason_category: input.reason_category,
        // A bounce's text comes from a remote server: NULs are dropped, not refused (see checkItem).
        description: input.description?.replace(/\0/g, '').slice(0, MAX_DESCRIPTION_CHARS) ?? null,
        scope: input.scope ?? 'all',
      },
      input.source,
    );
    if ('field' in res) throw validationError([{ field: res.field, message: res.message }]);
    if (res.scope === 'marketing') {
      const existing = await findSuppressionByIdentity(db, tenantId, res.type, res.identifier);
      if (existing && (existing.scope ?? 'all') === 'all') return toView(existing);
    }
    await upsertSuppressions(db, tenantId, [encode(res)], nowIso(), { count: false });
    const row = await findSuppressionByIdentity(db, tenantId, res.type, res.identifier);
    if (!row) throw new Error('suppression vanished after upsert');
    return toView(row);
  }

  /**
   * addAutomatic for many suppressions of one tenant (scope `all`), in one statement and without
   * reading them back: the inbound listener's batches of asynchronous bounces and complaints
   * (src/modules/feedback/report-batch.ts). The same address twice keeps the last, as one call
   * after another would (one upsert may not touch a row twice on PostgreSQL).
   */
  async addAutomaticMany(
    db: Executor,
    tenantId: string,
    inputs: readonly {
      identifier: string;
      reason_category: ReasonCategory;
      source: SuppressionSource;
      description?: string | null;
    }[],
  ): Promise<void> {
    const encoded = new Map<string, string>();
    for (const input of inputs) {
      const res = checkItem(
        {
          identifier: input.identifier,
          type: 'email',
          reason_category: input.reason_category,
          description: input.description?.replace(/\0/g, '').slice(0, MAX_DESCRIPTION_CHARS) ?? null,
          scope: 'all',
        },
        input.source,
      );
      if ('field' in res) throw validationError([{ field: res.field, message: res.message }]);
      encoded.set(identityKey(res.type, res.identifier), encode(res));
    }
    if (encoded.size) await upsertSuppressions(db, tenantId, [...encoded.values()], nowIso(), { count: false });
  }
}
