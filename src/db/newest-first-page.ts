import { type CursorCodec, type Page, toPage } from '../lib/pagination.ts';
import type { Executor } from './executor.ts';
import type { DB } from './schema.ts';
import { SOFT_DELETED_TABLES, type SoftDeletedTable } from './soft-delete.ts';

/**
 * The one keyset page of a tenant's rows, newest first: the lists of API keys, SMTP credentials,
 * webhooks and their deliveries, sending domains, templates, IP pools, warmup policies and
 * suppressions read their pages here, so the cursor, the order and the page size cannot drift
 * apart between resources. (Events and template versions page by keys of their own.)
 */

/** Tables whose rows belong to a tenant and carry a time-ordered (UUIDv7) id. */
export type TenantTable = {
  [K in keyof DB]: DB[K] extends { tenant_id: string; id: string } ? K : never;
}[keyof DB];

/** Text columns of `T` a page may be narrowed by (equality), e.g. a webhook's deliveries. */
export type PageFilter<T extends TenantTable> = {
  [C in keyof DB[T] & string]?: DB[T][C] extends string | null | undefined ? string | undefined : never;
};

export interface PageRequest {
  limit: number;
  /** The cursor of the page before: it holds that page's last id. */
  cursor?: string | undefined;
  cursors: CursorCodec;
}

/**
 * One page of a tenant's rows, newest first (ids are time-ordered); `map` turns rows into views.
 * A soft-deleted row (api_keys, smtp_credentials) is never listed; `filter` keeps the rows whose
 * columns equal the values given (an undefined value filters nothing).
 */
export async function newestFirstPage<T extends TenantTable, V>(
  db: Executor,
  table: T,
  tenantId: string,
  page: PageRequest,
  map: (row: DB[T]) => V,
  filter: PageFilter<T> = {},
): Promise<Page<V>> {
  const beforeId = page.cursor ? page.cursors.decode(page.cursor).id : undefined;
  // Kysely cannot type a query over a table named by a type parameter; the union of the tenant
  // tables has the columns used here, and the rows are the table's own.
  let q = db
    .selectFrom(table as TenantTable)
    .selectAll()
    .where('tenant_id', '=', tenantId);
  for (const [column, value] of Object.entries(filter)) {
    if (typeof value === 'string') q = q.where(db.dynamic.ref(column), '=', value);
  }
  if (SOFT_DELETED_TABLES.includes(table as SoftDeletedTable)) {
    q = q.where(db.dynamic.ref('deleted_at'), 'is', null);
  }
  if (beforeId) q = q.where('id', '<', beforeId);
  const rows = (await q
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute()) as unknown as DB[T][];
  return toPage(rows, page.limit, page.cursors, map);
}
