/** Suppression types, limits, views and the validation of one item (used by the service, routes and import). */
import type { SuppressionsTable } from '../../db/schema.ts';
import { isValidDomain, isValidEmail, normalizeEmail } from '../../lib/email.ts';
import { validationError } from '../../lib/errors.ts';
import type { CsvRecord } from './csv-reader.ts';
import { encodeSuppression } from './suppressions.repo.ts';

export const SUPPRESSION_TYPES = ['email', 'domain'] as const;
export const REASON_CATEGORIES = ['manual', 'unsubscribe', 'hard_bounce', 'complaint', 'invalid'] as const;
export const SUPPRESSION_SOURCES = ['api', 'import', 'bounce', 'complaint', 'unsubscribe', 'dashboard'] as const;
export type SuppressionType = (typeof SUPPRESSION_TYPES)[number];
export type ReasonCategory = (typeof REASON_CATEGORIES)[number];
export type SuppressionSource = (typeof SUPPRESSION_SOURCES)[number];
/** `all`: no mail at all; `marketing`: marketing mail only (an unsubscribe; docs/tracking.md). */
export const SUPPRESSION_SCOPES = ['all', 'marketing'] as const;
export type SuppressionScope = (typeof SUPPRESSION_SCOPES)[number];

export const MAX_UPSERT_ITEMS = 10_000;
export const MAX_IMPORT_ROWS = 1_000_000;
export const MAX_IMPORT_ERRORS = 100;
export const MAX_DESCRIPTION_CHARS = 1024;
/**
 * Valid rows per import transaction. Small on purpose: a batch should die young in V8's heap.
 * 5,000-row batches outlived several scavenges, got promoted, and a 1M-row import peaked near
 * 300 MB RSS, against ~200 MB (flat) with 1,000 at the same speed. Short transactions also keep
 * other writers from waiting long on SQLite's lock.
 */
export const IMPORT_BATCH_ROWS = 1000;
export const CSV_COLUMNS = ['identifier', 'type', 'reason_category', 'description', 'scope'] as const;
export type CsvColumn = (typeof CSV_COLUMNS)[number];

export interface SuppressionView {
  id: string;
  identifier: string;
  type: string;
  reason_category: string;
  description: string | null;
  source: string;
  scope: SuppressionScope;
  created_at: string;
  updated_at: string;
}

/** One item as a caller sends it (JSON item, CSV row, dashboard form). */
export interface SuppressionItemInput {
  identifier: unknown;
  type?: unknown;
  reason_category?: unknown;
  description?: unknown;
  /** Default `all`. */
  scope?: unknown;
}

/** A validated, normalized item ready to be written. */
export interface NormalizedItem {
  identifier: string;
  type: SuppressionType;
  reason_category: ReasonCategory;
  description: string | null;
  source: SuppressionSource;
  scope: SuppressionScope;
}

export interface UpsertResult {
  created: number;
  updated: number;
}

export interface ImportResult {
  imported: number;
  skipped: number;
  errors: { line: number; message: string }[];
}

export interface SuppressionMatch {
  id: string;
  reason_category: string;
  type: SuppressionType;
  scope: SuppressionScope;
  /** The stored identifier that matched (the address, or its domain). */
  identifier: string;
}

export interface ListQuery {
  limit: number;
  cursor?: string | undefined;
  type?: string | undefined;
  reason_category?: string | undefined;
  identifier?: string | undefined;
  scope?: string | undefined;
}

export function toView(row: SuppressionsTable): SuppressionView {
  return {
    id: row.id,
    identifier: row.identifier,
    type: row.type,
    reason_category: row.reason_category,
    description: row.description,
    source: row.source,
    scope: row.scope === 'marketing' ? 'marketing' : 'all',
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function isType(v: unknown): v is SuppressionType {
  return v === 'email' || v === 'domain';
}

export function isScope(v: unknown): v is SuppressionScope {
  return v === 'all' || v === 'marketing';
}

export function isReason(v: unknown): v is ReasonCategory {
  return typeof v === 'string' && (REASON_CATEGORIES as readonly string[]).includes(v);
}

export function quote(value: string): string {
  return JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}...` : value);
}

/**
 * Normalizes an identifier: trimmed; an email's domain part lower-cased (the local part is
 * case-sensitive, RFC 5321); a domain lower-cased. Returns an error message when invalid.
 */
export function normalizeIdentifier(type: SuppressionType, raw: string): { value: string } | { error: string } {
  const trimmed = raw.trim();
  if (trimmed === '') return { error: 'identifier is required' };
  if (type === 'email') {
    if (!isValidEmail(trimmed)) return { error: `identifier ${quote(trimmed)} is not a valid email address` };
    return { value: normalizeEmail(trimmed) };
  }
  const domain = trimmed.toLowerCase();
  if (!isValidDomain(domain)) return { error: `identifier ${quote(trimmed)} is not a valid domain name` };
  return { value: domain };
}

/**
 * Validates one item. `type` and `reason_category` must be given unless defaults are passed
 * (CSV rows default to email/manual). Returns the normalized item or the first fault.
 */
export function checkItem(
  item: SuppressionItemInput,
  source: SuppressionSource,
  defaults?: { type: SuppressionType; reason_category: ReasonCategory },
): NormalizedItem | { field: string; message: string } {
  const type = item.type === undefined && defaults ? defaults.type : item.type;
  if (!isType(type)) {
    return {
      field: 'type',
      message: type === undefined ? 'type is required' : `type must be one of ${SUPPRESSION_TYPES.join(', ')}`,
    };
  }
  const reason = item.reason_category === undefined && defaults ? defaults.reason_category : item.reason_category;
  if (!isReason(reason)) {
    return {
      field: 'reason_category',
      message:
        reason === undefined
          ? 'reason_category is required'
          : `reason_category must be one of ${REASON_CATEGORIES.join(', ')}`,
    };
  }
  const scope = item.scope ?? 'all';
  if (!isScope(scope)) return { field: 'scope', message: `scope must be one of ${SUPPRESSION_SCOPES.join(', ')}` };
  if (typeof item.identifier !== 'string') return { field: 'identifier', message: 'identifier must be a string' };
  const id = normalizeIdentifier(type, item.identifier);
  if ('error' in id) return { field: 'identifier', message: id.error };
  let description: string | null = null;
  if (item.description !== undefined && item.description !== null) {
    if (typeof item.description !== 'string') return { field: 'description', message: 'description must be a string' };
    if (item.description.length > MAX_DESCRIPTION_CHARS) {
      return { field: 'description', message: `description must be at most ${MAX_DESCRIPTION_CHARS} characters` };
    }
    // PostgreSQL text cannot hold U+0000: a CSV row with one was a 500 for the whole import.
    if (item.description.includes('\0')) {
      return { field: 'description', message: 'description must not contain the NUL character (U+0000)' };
    }
    description = item.description;
  }
  return { identifier: id.value, type, reason_category: reason, description, source, scope };
}

export function identityKey(type: string, identifier: string): string {
  return `${type}\u0000${identifier}`;
}

export function encode(it: NormalizedItem): string {
  return encodeSuppression(it.identifier, it.type, it.reason_category, it.description, it.source, it.scope);
}

export type ColumnIndex = Partial<Record<CsvColumn, number>> & { identifier: number; width: number };

export function parseHeader(rec: CsvRecord): ColumnIndex {
  const fail = (message: string) => validationError([{ field: 'file', message }]);
  if (!rec.fields) throw fail(`The CSV header (line ${rec.line}) is malformed: ${rec.error ?? ''}`);
  const index: Partial<Record<CsvColumn, number>> = {};
  rec.fields.forEach((raw, i) => {
    const name = raw.trim().toLowerCase();
    if (name === '' && i === rec.fields!.length - 1 && i > 0) return; // trailing comma
    if (!(CSV_COLUMNS as readonly string[]).includes(name)) {
      throw fail(`Unknown CSV column ${quote(raw)}; the header must use ${CSV_COLUMNS.join(',')}`);
    }
    const col = name as CsvColumn;
    if (index[col] !== undefined) throw fail(`CSV column ${quote(name)} appears twice in the header`);
    index[col] = i;
  });
  if (index.identifier === undefined) {
    throw fail(`The CSV header must include an identifier column (${CSV_COLUMNS.join(',')})`);
  }
  return { ...index, identifier: index.identifier, width: Math.max(...Object.values(index)) + 1 };
}

/** A CSV row as an item: empty cells mean "not given" (type and reason then take their defaults). */
export function rowToItem(fields: string[], cols: ColumnIndex): SuppressionItemInput | string {
  const width = cols.width;
  for (let i = width; i < fields.length; i++) {
    if ((fields[i] ?? '').trim() !== '') return `Too many fields: the header has ${width} columns`;
  }
  const cell = (col: CsvColumn): string | undefined => {
    const i = cols[col];
    const v = i === undefined ? undefined : fields[i]?.trim();
    return v === '' ? undefined : v;
  };
  return {
    identifier: cell('identifier') ?? '',
    type: cell('type')?.toLowerCase(),
    reason_category: cell('reason_category')?.toLowerCase(),
    description: cell('description'),
    scope: cell('scope')?.toLowerCase(),
  };
}
